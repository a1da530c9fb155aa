import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Readable } from "node:stream";
import { gzipSync } from "node:zlib";
import { afterAll, describe, expect, it } from "vitest";
import { ReplayError } from "../../src/replay/errors.js";
import { type ReplayOptions, replayLogs } from "../../src/replay/replay.js";
import { formatText } from "../../src/replay/report-text.js";
import { cliEntry } from "../support/cli-entry.js";
import { onTerminal } from "../support/terminal.js";
import { combinedLine, fixture, T0 } from "./helpers.js";

const dir = mkdtempSync(join(tmpdir(), "edgelimit-replay-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function write(name: string, lines: readonly string[] | Buffer): string {
  const path = join(dir, name);
  writeFileSync(path, Buffer.isBuffer(lines) ? lines : `${lines.join("\n")}\n`);
  return path;
}

/** Five clients on /fixed (5 per minute) over three minutes, one request every 2 s each. */
const sorted: string[] = [];
for (let second = 0; second < 180; second += 2) {
  for (let client = 1; client <= 5; client++) {
    sorted.push(combinedLine(`198.51.100.${client}`, T0 + (second + client / 10) * 1000, "/fixed"));
  }
}
const sortedLog = write("sorted.log", sorted);

async function figures(inputs: string[], extra: Partial<ReplayOptions> = {}) {
  const { report } = await replayLogs({ policy: fixture("algorithms.yaml"), inputs, ...extra });
  const fixed = report.rules.find((rule) => rule.id === "fixed");
  return {
    requests: report.requests,
    late: report.late,
    allowed: fixed?.allowed,
    refused: fixed?.refused,
    peak: fixed?.peaks.max,
  };
}

describe("reading, ordering and merging", () => {
  it("replays the sorted log with its known answer", async () => {
    // 30 requests per client per minute, 5 allowed: 3 minutes x 5 clients x 5.
    expect(await figures([sortedLog])).toEqual({
      requests: 450,
      late: 0,
      allowed: 75,
      refused: 375,
      peak: 30,
    });
  });

  it("puts lines out of order within --reorder back in place, and counts later ones as late", async () => {
    // Every block of 20 lines (8 s of traffic) reversed: out of order by less than a minute.
    const shuffled: string[] = [];
    for (let i = 0; i < sorted.length; i += 20) shuffled.push(...sorted.slice(i, i + 20).reverse());
    expect(await figures([write("shuffled.log", shuffled)])).toEqual(await figures([sortedLog]));

    // A minute-0 line moved to the end arrives more than two minutes late.
    const late = [...sorted.slice(1), sorted[0] as string];
    const lateLog = write("late.log", late);
    expect((await figures([lateLog])).late).toBe(1);
    expect(await figures([lateLog], { reorderMs: 300_000 })).toEqual(await figures([sortedLog]));
  });

  it("merges several files by time, as one sorted log", async () => {
    const odd = write(
      "a.log",
      sorted.filter((_, i) => i % 2 === 1),
    );
    const even = write(
      "b.log",
      sorted.filter((_, i) => i % 2 === 0),
    );
    expect(await figures([odd, even])).toEqual(await figures([sortedLog]));
    // Globs are expanded by replay itself.
    expect(await figures([join(dir, "[ab].log")])).toEqual(await figures([sortedLog]));
  });

  it("reads gzip by its content, whatever the name, and stdin", async () => {
    const gzipped = write("sorted.gz", gzipSync(readFileSync(sortedLog)));
    const misnamed = write("plain-name.log", gzipSync(readFileSync(sortedLog)));
    const expected = await figures([sortedLog]);
    expect(await figures([gzipped])).toEqual(expected);
    expect(await figures([misnamed])).toEqual(expected);
    const stdin = Readable.from([readFileSync(gzipped)]);
    expect(await figures(["-"], { stdin })).toEqual(expected);
  });

  it("holds a bounded number of records while reordering", async () => {
    let held = 0;
    await replayLogs({
      policy: fixture("algorithms.yaml"),
      inputs: [sortedLog],
      reorderMs: 10_000,
      onProgress: (progress) => {
        held = Math.max(held, progress.held);
      },
    });
    // 2.5 requests a second: a 10 s window holds about 25, never the file's 450.
    expect(held).toBeGreaterThan(0);
    expect(held).toBeLessThanOrEqual(30);
  });

  it("counts malformed lines with their line numbers and stops past --max-errors", async () => {
    const { report } = await replayLogs({
      policy: fixture("bands.yaml"),
      inputs: [fixture("combined.log")],
    });
    expect(report.malformed).toBe(2);
    expect(report.requests).toBe(3);
    expect(report.errors.map((error) => error.line)).toEqual([4, 5]);
    await expect(
      replayLogs({
        policy: fixture("bands.yaml"),
        inputs: [fixture("combined.log")],
        maxErrors: 1,
      }),
    ).rejects.toMatchObject({
      code: "EL_REPLAY_TOO_MANY_ERRORS",
      message: expect.stringMatching(/more than 1 malformed lines .* stopped at .*combined.log:5/s),
    });
    await expect(
      replayLogs({ policy: fixture("bands.yaml"), inputs: [join(dir, "none-*.log")] }),
    ).rejects.toBeInstanceOf(ReplayError);
  });
});

describe("edgelimit replay --json", () => {
  // 10 requests to / from one client (global 4, challenged below 2x), and 3 to /api/search from
  // another (a shadow rule of 2 would refuse the third; the global rule lets all three through).
  const lines = [
    ...Array.from({ length: 10 }, (_, i) => combinedLine("203.0.113.10", T0 + i * 1000, "/")),
    ...Array.from({ length: 3 }, (_, i) =>
      combinedLine("203.0.113.11", T0 + 500 + i * 1000, "/api/search?q=1", "bot/2"),
    ),
  ].sort((a, b) => (a.slice(a.indexOf("[")) < b.slice(b.indexOf("[")) ? -1 : 1));
  const log = write("bands.log", lines);

  function cli(...args: string[]) {
    const result = spawnSync(process.execPath, [...cliEntry(), "replay", ...args], {
      encoding: "utf8",
      env: { ...process.env, EDGELIMIT_JWT_SECRET: "" },
    });
    return { code: result.status, stdout: result.stdout, stderr: result.stderr };
  }

  it("prints one object with the documented fields, checked one by one", () => {
    const { code, stdout, stderr } = cli("--policy", fixture("bands.yaml"), "--json", log);
    expect(stderr).toBe("");
    expect(code).toBe(0);
    const report = JSON.parse(stdout);
    expect(report.requests).toBe(13);
    expect(report.malformed).toBe(0);
    expect(report.actions).toEqual({ allow: 7, challenge: 3, block: 3, unavailable: 0 });
    expect(report.rules.map((rule: { id: string }) => rule.id)).toEqual([
      "anonymous.global",
      "anonymous.path./api/search",
    ]);
    const [global, search] = report.rules;
    expect(global).toMatchObject({
      allowed: 7,
      refused: 6,
      challenged: 3,
      blocked: 3,
      refusedSubjects: 1,
    });
    expect(search).toMatchObject({
      shadow: true,
      allowed: 3,
      refused: 0,
      shadowRefused: 1,
      refusedSubjects: 0,
    });
    expect(report.identity.users).toBe(false);
    expect(report.topRefused[0]).toMatchObject({
      subject: "ip:203.0.113.10",
      refused: 6,
      peak: 10,
      paths: [{ value: "/", count: 6 }],
    });
    expect(report.start).toBe("2024-05-01T10:00:00.000Z");
  });

  it("shows its progress on a terminal, on stderr, and clears it before the report", () => {
    // Long enough to run past the first half second: 300,000 lines.
    const many: string[] = [];
    for (let i = 0; i < 300_000; i++) {
      many.push(combinedLine(`198.51.100.${i % 200}`, T0 + Math.floor(i / 50) * 1000, "/"));
    }
    const big = write("progress.log", many);
    const args = [...cliEntry(), "replay", "--policy", fixture("bands.yaml"), big];
    const { code, output } = onTerminal([process.execPath, ...args]);
    expect(code).toBe(0);
    expect(output).toMatch(
      /\r[\d,]+ lines, [\d,]+ lines\/s, [\d.]+ MB of [\d.]+ MB read(, ETA \d+ s)?/,
    );
    expect(output).toContain("\r\u001b[Kedgelimit replay:");
    expect(onTerminal([process.execPath, ...args, "--no-progress"]).output).not.toContain(
      "lines/s",
    );
  }, 120_000);

  it("--compare shows a second policy on the same traffic", () => {
    const { code, stdout } = cli(
      "--policy",
      fixture("bands.yaml"),
      "--compare",
      fixture("bands-loose.yaml"),
      "--json",
      log,
    );
    expect(code).toBe(0);
    const report = JSON.parse(stdout);
    expect(report.compare.actions).toEqual({ allow: 11, challenge: 2, block: 0, unavailable: 0 });
    const text = cli(
      "--policy",
      fixture("bands.yaml"),
      "--compare",
      fixture("bands-loose.yaml"),
      log,
    );
    expect(text.stdout).toMatch(
      /Compare: A = .*bands.yaml, B = .*bands-loose.yaml, same 13 requests/,
    );
  });

  it("names the known formats for an unknown one, and needs no secrets for the seed policy", () => {
    const unknown = cli("--policy", fixture("bands.yaml"), "--format", "w3c", log);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toMatch(
      /the formats are cloudfront, alb, combined, common, cloudflare, json/,
    );
    const seed = cli(
      "--policy",
      join(import.meta.dirname, "../../examples/policies/cloudfront.yaml"),
      "--json",
      log,
    );
    expect(seed.code).toBe(0);
    expect(JSON.parse(seed.stdout).requests).toBe(13);
  });
});

describe("bounded input", () => {
  const two = `${combinedLine("203.0.113.1", T0, "/")}\n${combinedLine("203.0.113.1", T0 + 1, "/")}\n`;

  it("stops at a line longer than 1 MiB, naming it, without reading the rest of the input", async () => {
    let pulled = 0;
    // 64 MiB with no newline after two good lines, made as it is read: the old reader held it
    // all and searched all of it again for each 1 MiB that came (3.3 s, 0.69 GB).
    async function* input(): AsyncGenerator<Buffer> {
      yield Buffer.from(two);
      const mebibyte = Buffer.alloc(1 << 20, 0x61);
      for (let i = 0; i < 64; i++) {
        pulled++;
        yield mebibyte;
      }
    }
    await expect(
      replayLogs({
        policy: fixture("bands.yaml"),
        inputs: ["-"],
        stdin: input() as unknown as NodeJS.ReadableStream,
      }),
    ).rejects.toMatchObject({
      code: "EL_REPLAY_INPUT",
      message: expect.stringMatching(/^stdin:3: a line longer than 1,048,576 characters/),
    });
    expect(pulled).toBeLessThanOrEqual(2);
  });

  it("names an over-long line that arrives whole, between others", async () => {
    const text = `${two}${"b".repeat((1 << 20) + 1)}\n${two}`;
    await expect(
      replayLogs({
        policy: fixture("bands.yaml"),
        inputs: [write("long-line.log", Buffer.from(text))],
      }),
    ).rejects.toMatchObject({
      code: "EL_REPLAY_INPUT",
      message: expect.stringMatching(/long-line\.log:3: a line longer than/),
    });
    // A line of exactly 1 MiB is read (and is malformed, being no log line).
    const { report } = await replayLogs({
      policy: fixture("bands.yaml"),
      inputs: [write("mebibyte-line.log", Buffer.from(`${two}${"b".repeat(1 << 20)}\n${two}`))],
    });
    expect(report).toMatchObject({ requests: 4, malformed: 1 });
  });
});

describe("what a line may not say", () => {
  it("reports a JSON time beyond any date as a malformed line, with its number", async () => {
    // It used to end the run with `Invalid time value` and no line number.
    const lines = [
      JSON.stringify({ ip: "203.0.113.1", time: T0, path: "/" }),
      JSON.stringify({ ip: "203.0.113.1", time: 1e300, path: "/" }),
      JSON.stringify({ ip: "203.0.113.1", time: T0 + 1000, path: "/" }),
    ];
    const { report } = await replayLogs({
      policy: fixture("bands.yaml"),
      inputs: [write("far-future.jsonl", lines)],
    });
    expect(report).toMatchObject({ requests: 2, malformed: 1 });
    expect(report.errors[0]).toMatchObject({ line: 2, reason: "no usable time (1e+300)" });
  });

  it("counts an address the limiter cannot read as a malformed line, not as ip:unknown", async () => {
    const lines = [
      combinedLine("999.1.2.3", T0, "/"),
      combinedLine("crawl-66-249-66-1.googlebot.com", T0 + 1, "/"),
      combinedLine("203.0.113.1", T0 + 2, "/"),
      combinedLine("2001:db8::1", T0 + 3, "/"),
      combinedLine("2001:db8::g", T0 + 4, "/"),
      combinedLine("-", T0 + 5, "/"),
    ];
    const { report } = await replayLogs({
      policy: fixture("bands.yaml"),
      inputs: [write("addresses.log", lines)],
    });
    expect(report.malformed).toBe(3);
    expect(report.errors.map((error) => [error.line, error.reason])).toEqual([
      [1, '"999.1.2.3" is not an IP address'],
      [2, '"crawl-66-249-66-1.googlebot.com" is not an IP address'],
      [5, '"2001:db8::g" is not an IP address'],
    ]);
    // The line with no address at all ("-") is replayed, as anonymous traffic without one.
    expect(report.requests).toBe(3);
  });

  it("replays an Apache line cut off in its user agent, and reports it as truncated", async () => {
    const whole = combinedLine("203.0.113.5", T0, "/", "Mozilla/5.0 (X11; Linux x86_64)");
    const cut = combinedLine("203.0.113.5", T0 + 1000, "/", "Mozilla/5.0 (X11; Linux x86_64)");
    const log = write("cut.log", [whole, cut.slice(0, -12)]);
    const { report } = await replayLogs({ policy: fixture("bands.yaml"), inputs: [log] });
    expect(report).toMatchObject({ requests: 2, malformed: 0, truncated: 1 });
    expect(report.truncatedLines[0]).toMatchObject({
      line: 2,
      reason: "cut off: no user agent's end (no closing quote)",
    });
    const text = formatText(report);
    expect(text).toContain(
      "1 truncated lines replayed (cut off after their address, time and request)",
    );
    expect(text).toMatch(/Truncated lines \(first 1 of 1\):\n {2}.*cut\.log:2: cut off/);
  });
});
