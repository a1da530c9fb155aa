import { pathToFileURL } from "node:url";
import { type BrowserContext, chromium, type Page } from "playwright-core";
import { executableOf } from "./system-packages.js";

/**
 * Headless Chromium with a fresh profile: the system's (`CHROMIUM_PATH`, or the usual names and
 * paths of test/system-packages.json, which `npm test` installs where it can); playwright never
 * downloads a browser here. The background-networking switches stop it from calling out: this
 * machine has no network beyond loopback, and those calls would only fail.
 */
export function launchChromium(userDataDir: string): Promise<BrowserContext> {
  return chromium.launchPersistentContext(userDataDir, {
    executablePath: executableOf("chromium"),
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
