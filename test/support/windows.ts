import { readFileSync, writeFileSync } from "node:fs";
import { basename, join } from "node:path";

/**
 * Waits, when needed, until at least `neededMs` are left in the current epoch-aligned window of
 * `windowMs`: tests that count against a real clock (a spawned gateway, workerd) must not see
 * their window roll over halfway.
 */
export async function withinOneWindow(windowMs: number, neededMs: number): Promise<void> {
  const left = windowMs - (Date.now() % windowMs);
  if (left < neededMs) await new Promise((resolve) => setTimeout(resolve, left + 50));
}

export const HOUR_MS = 3_600_000;

/**
 * A policy's text with its 60 s windows made an hour. A test that counts against the real clock
 * but is not about minute windows uses it with a fresh subject: the same limits and answers,
 * and `withinOneWindow(HOUR_MS, ...)` waits only in an hour's last seconds, where a minute's
 * window made the test wait up to its whole need in the last seconds of every minute.
 */
export function withHourWindows(policy: string): string {
  if (!policy.includes("window: 60s")) throw new Error("the policy has no 60 s window");
  return policy.replaceAll("window: 60s", "window: 1h");
}

/** `withHourWindows` of the policy file `seed`, written into `dir`; the new file's path. */
export function hourPolicyFile(seed: string, dir: string): string {
  const file = join(dir, basename(seed).replace(/\.ya?ml$/, "-hour.yaml"));
  writeFileSync(file, withHourWindows(readFileSync(seed, "utf8")));
  return file;
}
