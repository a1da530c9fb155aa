import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { BrowserContext } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { replayLogs } from "../../src/replay/replay.js";
import { formatHtml } from "../../src/replay/report-html.js";
import { formatText } from "../../src/replay/report-text.js";
import { launchChromium, openFilePage } from "../support/chromium.js";
import { combinedLine, fixture, T0 } from "./helpers.js";

/** The --html page in Debian's Chromium: opened from a file, with no network at all. */
const dir = mkdtempSync(join(tmpdir(), "edgelimit-replay-html-"));
let browser: BrowserContext | undefined;
let page: string;
let text: string;

beforeAll(async () => {
  const lines: string[] = [];
  for (let i = 0; i < 120; i++) {
    lines.push(combinedLine("203.0.113.10", T0 + i * 500, "/", "<b>bot</b>"));
    if (i % 4 === 0) lines.push(combinedLine("203.0.113.11", T0 + i * 500 + 1, "/api/search"));
  }
  const log = join(dir, "traffic.log");
  writeFileSync(log, `${lines.join("\n")}\n`);
  const result = await replayLogs({ policy: fixture("bands.yaml"), inputs: [log] });
  page = join(dir, "report.html");
  writeFileSync(page, formatHtml(result.report, result.series));
  text = formatText(result.report);
  browser = await launchChromium(join(dir, "profile"));
}, 60_000);

afterAll(async () => {
  await browser?.close();
  rmSync(dir, { recursive: true, force: true });
});

describe("the --html page", () => {
  it("draws its charts and shows its tables with nothing fetched", async () => {
    const { tab, url, errors, requested } = await openFilePage(browser as BrowserContext, page);

    await tab.waitForSelector("#chart-actions canvas");
    await tab.waitForSelector("#chart-rules canvas");
    // Both series of the first chart, and one per refusing rule in the second, in the legends.
    const legends = await tab.$$eval("#chart-actions .u-legend .u-label", (els) =>
      els.map((el) => el.textContent),
    );
    expect(legends).toEqual(expect.arrayContaining(["allowed", "refused"]));
    const ruleLegends = await tab.$$eval("#chart-rules .u-legend .u-label", (els) =>
      els.map((el) => el.textContent),
    );
    expect(ruleLegends).toEqual(
      expect.arrayContaining(["anonymous.global", "anonymous.path./api/search (shadow)"]),
    );

    const ruleRows = await tab.$$eval("#rules tbody tr", (rows) =>
      rows.map((row) => [...row.querySelectorAll("td")].map((cell) => cell.textContent)),
    );
    expect(ruleRows.map((row) => row[0])).toEqual([
      "anonymous.global",
      "anonymous.path./api/search (shadow)",
    ]);
    const offender = await tab.textContent("#offenders tbody tr td");
    expect(offender).toBe("ip:203.0.113.10");
    expect(await tab.textContent("#tuning")).toContain("anonymous.global");
    expect(Number(await tab.textContent("#total-block"))).toBeGreaterThan(0);
    // A client's user agent is shown as text, never run as markup.
    expect(await tab.$("#offenders b")).toBeNull();
    expect(await tab.textContent("#offenders")).toContain("<b>bot</b> (");

    expect(errors).toEqual([]);
    expect(requested).toEqual([url]);
  });

  it("shows the suggested policy change as the text report does", async () => {
    const { tab } = await openFilePage(browser as BrowserContext, page);
    const section = text.slice(text.indexOf("Suggested policy change"));
    const [heading, ...rest] = section.slice(0, section.indexOf("\n\n")).split("\n");
    const lines = rest.map((line) => line.trim());
    expect(lines.length).toBeGreaterThan(0);
    expect(await tab.textContent("h2:has(+ #changes)")).toBe(heading?.replace(/:$/, ""));
    expect(await tab.$$eval("#changes li", (items) => items.map((li) => li.textContent))).toEqual(
      lines,
    );
  });
});
