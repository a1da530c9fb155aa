import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { BrowserContext } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { formatHtml } from "../../src/simulate/report-html.js";
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
  writeFileSync(page, formatHtml(report, 100));
  browser = await launchChromium(join(dir, "profile"));
}, 60_000);

afterAll(async () => {
  await browser?.close();
  rmSync(dir, { recursive: true, force: true });
});

interface Drawn {
  legends: string[];
  data: (number | null)[][];
}

describe("the simulate --html page", () => {
  it("draws a bar per mode in every chart and a line per mode each minute, with nothing fetched", async () => {
    const { tab, url, errors, requested } = await openFilePage(browser as BrowserContext, page);
    await tab.waitForSelector("#chart-latency canvas");
    const charts = await tab.$$eval("#charts .chart", (places) => places.map((place) => place.id));
    expect(charts).toEqual([
      "chart-over",
      "chart-lost",
      "chart-operations",
      "chart-busy",
      "chart-cost",
      "chart-latency",
    ]);
    const drawn = (id: string) =>
      tab.evaluate((target): Drawn => {
        const charts = (window as unknown as Record<string, Record<string, unknown>>)
          .edgelimitCharts as Record<string, { data: (number | null)[][]; root: HTMLElement }>;
        const chart = charts[target] as { data: (number | null)[][]; root: HTMLElement };
        const legends = [...chart.root.querySelectorAll(".u-legend .u-label")].map(
          (label) => label.textContent ?? "",
        );
        return { legends, data: chart.data };
      }, id);
    for (const id of charts) {
      const { legends, data } = await drawn(id);
      // One series per mode, each with one bar.
      // `exact` on a global table counts per region, and is named so.
      expect(legends).toEqual(["two-writes", "per-region"]);
      expect(data.slice(1).map((values) => values.filter((v) => v !== null).length)).toEqual([
        1, 1,
      ]);
    }
    // Two-writes loses increments to last-writer-wins; exact loses none.
    const lost = await drawn("chart-lost");
    expect(lost.data[1]?.[0]).toBeGreaterThan(30);
    expect(lost.data[2]?.[1]).toBe(0);
    // The two-writes bar is on the canvas in its colour, halfway up.
    const pixel = await tab.evaluate(() => {
      const charts = (window as unknown as Record<string, Record<string, unknown>>)
        .edgelimitCharts as Record<string, unknown>;
      const chart = charts["chart-lost"] as {
        data: number[][];
        ctx: CanvasRenderingContext2D;
        valToPos(value: number, scale: string, canvas: boolean): number;
      };
      const x = chart.valToPos(0, "x", true);
      const y =
        (chart.valToPos(chart.data[1]?.[0] ?? 0, "y", true) + chart.valToPos(0, "y", true)) / 2;
      return [...chart.ctx.getImageData(Math.round(x), Math.round(y), 1, 1).data].slice(0, 3);
    });
    expect(pixel).toEqual([0xc0, 0x39, 0x2b]);

    const attackers = await drawn("timeline-attackers");
    expect(attackers.legends.slice(1)).toEqual(["two-writes", "per-region"]);
    // Three minutes (150 s), both modes admitting some of the attacker's requests in each.
    expect(attackers.data[0]).toEqual([0, 1, 2]);
    expect(attackers.data.slice(1).every((values) => values.every((v) => (v ?? 0) > 0))).toBe(true);
    expect(await tab.textContent("#table")).toContain("lost increments");
    expect(errors).toEqual([]);
    expect(requested).toEqual([url]);
  }, 60_000);
});
