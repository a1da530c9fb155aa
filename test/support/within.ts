/**
 * Polls `check` until it holds, at most `boundMs` (default 15 s: a bound of a few seconds, with
 * room for a busy machine); resolves how long it took, or throws naming `what`.
 */
export async function within(
  check: () => Promise<boolean>,
  what: string,
  boundMs = 15_000,
  everyMs = 100,
): Promise<number> {
  const started = Date.now();
  while (!(await check())) {
    if (Date.now() - started > boundMs) throw new Error(`${what}: not within ${boundMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, everyMs));
  }
  return Date.now() - started;
}
