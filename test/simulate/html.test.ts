import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { BrowserContext } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { formatHtml } from "../../src/simulate/report-html.js";
import { formatText } from "../../src/simulate/report-text.js";
import { simulate } from "../../src/simulate/run.js";
import { launchChromium, openFilePage } from "../support/chromium.js";
import { twoRegions } from "./helpers.js";

/** The --html page in Debian's Chromium: opened from a file, with nothing fetched. */
const dir = mkdtempSync(join(tmpdir(), "edgelimit-simulate-html-"));
let browser: BrowserContext | undefined;
let page: string;

beforeAll(async () => {
  const report = await simulate(twoRegions({ duration: "150s" }));
  page = join(dir, "report.html");
  writeFileSync(page, formatHtml(report, formatText(report, 100)));
  browser = await launchChromium(join(dir, "profile"));
}, 60_000);

afterAll(async () => {
  await browser?.close();
  rmSync(dir, { recursive: true, force: true });
});

describe("the simulate --html page", () => {
  it("draws a bar per mode in every chart and a timeline per mode, with nothing fetched", async () => {
    const { tab, url, errors, requested } = await openFilePage(browser as BrowserContext, page);
    const barsPerChart = await tab.$$eval("#charts figure", (figures) =>
      figures.map((figure) => figure.querySelectorAll("rect").length),
    );
    expect(barsPerChart).toEqual([2, 2, 2, 2, 2, 2]);
    // The lost-increments bar of the two-writes mode is drawn wider than exact's (which loses none).
    const lost = await tab.$$eval("#chart-lost rect", (rects) =>
      rects.map((rect) => rect.getBoundingClientRect().width),
    );
    expect(lost[0]).toBeGreaterThan((lost[1] as number) * 10);
    const lines = await tab.$$eval(".timeline path.attackers", (paths) =>
      paths.map((path) => (path as SVGPathElement).getTotalLength()),
    );
    expect(lines).toHaveLength(2);
    expect(lines.every((length) => length > 100)).toBe(true);
    expect(await tab.textContent("#table")).toContain("lost increments");
    expect(errors).toEqual([]);
    expect(requested).toEqual([url]);
  }, 60_000);
});
