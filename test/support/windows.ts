/**
 * Waits, when needed, until at least `neededMs` are left in the current epoch-aligned window of
 * `windowMs`: tests that count against a real clock (a spawned gateway, workerd) must not see
 * their window roll over halfway.
 */
export async function withinOneWindow(windowMs: number, neededMs: number): Promise<void> {
  const left = windowMs - (Date.now() % windowMs);
  if (left < neededMs) await new Promise((resolve) => setTimeout(resolve, left + 50));
}
