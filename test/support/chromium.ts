import { type BrowserContext, chromium } from "playwright-core";

/** Debian's Chromium, which `.ci/run` installs; playwright never downloads a browser here. */
export const CHROMIUM_PATH = "/usr/bin/chromium";

/**
 * Headless Chromium with a fresh profile. The background-networking switches stop it from
 * calling out: this machine has no network beyond loopback, and those calls would only fail.
 */
export function launchChromium(userDataDir: string): Promise<BrowserContext> {
  return chromium.launchPersistentContext(userDataDir, {
    executablePath: CHROMIUM_PATH,
    headless: true,
    args: [
      "--headless",
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
    ],
  });
}
