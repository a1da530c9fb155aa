import { pathToFileURL } from "node:url";
import { type BrowserContext, chromium, type Page } from "playwright-core";

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

/**
 * Opens a page written to disk in a new tab, recording its script errors and every URL it
 * requests (a self-contained report requests only itself).
 */
export async function openFilePage(
  browser: BrowserContext,
  file: string,
): Promise<{ tab: Page; url: string; errors: string[]; requested: string[] }> {
  const tab = await browser.newPage();
  const errors: string[] = [];
  tab.on("pageerror", (error) => errors.push(error.message));
  const requested: string[] = [];
  tab.on("request", (request) => requested.push(request.url()));
  const url = pathToFileURL(file).href;
  await tab.goto(url);
  return { tab, url, errors, requested };
}
