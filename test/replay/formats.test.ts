import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { DOCUMENTED_FIELDS } from "../../src/replay/formats/cloudfront.js";
import { detectFormat, FORMATS, formatNamed } from "../../src/replay/formats/index.js";
import { fixture, parseFixture } from "./helpers.js";

const at = (iso: string) => Date.parse(iso);

describe("CloudFront standard logs", () => {
  const { format, records, failures } = parseFixture("cloudfront.log");

  it("is detected from its #Fields header and reads every documented field by name", () => {
    expect(format).toBe("cloudfront");
    expect(DOCUMENTED_FIELDS).toHaveLength(33);
    expect(records).toHaveLength(3);
  });

  it("reads UTC date and time, the query, and undoes CloudFront's URL-encoding", () => {
    expect(records[0]).toMatchObject({
      time: at("2024-05-01T10:00:00Z"),
      ip: "203.0.113.7",
      method: "GET",
      path: "/api/search?q=rate limit&page=2",
      userAgent: "Mozilla/5.0 (X11; Linux x86_64)",
      status: 200,
      line: 3,
    });
  });

  it("keeps an IPv6 client and ignores x-forwarded-for (the viewer wrote it)", () => {
    expect(records[1]).toMatchObject({
      ip: "2001:db8:85a3::8a2e:370:7334",
      method: "POST",
      // %2572 in the log is the client's %72: the limiter normalises it to /api/reports.
      path: "/api/%72eports",
      userAgent: "curl/8.5.0",
    });
  });

  it("reads - placeholders as absent, and IPv4-mapped clients as written", () => {
    expect(records[2]).toMatchObject({
      ip: "::ffff:198.51.100.20",
      path: "/café/menu",
      userAgent: undefined,
      status: 304,
    });
  });

  it("reports a short line as malformed with its line number", () => {
    expect(failures.get(6)).toMatch(/tab-separated/);
  });

  it("follows a #Fields header with fewer columns, and reads a user column by name", () => {
    const parser = formatNamed("cloudfront").create({
      fields: {},
      userField: "cs(Cookie)",
      planField: undefined,
    });
    expect(parser.parse("#Fields: time date c-ip cs-uri-stem cs(Cookie)", 1)).toBeNull();
    expect(parser.parse("23:59:59\t2024-05-01\t192.0.2.1\t/x\tu_7", 2)).toMatchObject({
      time: at("2024-05-01T23:59:59Z"),
      ip: "192.0.2.1",
      path: "/x",
      user: "u_7",
      method: "GET",
    });
  });
});

describe("ALB access logs", () => {
  const { format, records, failures } = parseFixture("alb.log");

  it("is detected and reads quoted request and user agent", () => {
    expect(format).toBe("alb");
    expect(records[0]).toMatchObject({
      time: at("2024-05-01T10:00:00.186Z"),
      ip: "203.0.113.7",
      method: "GET",
      path: "/api/search?q=a%20b",
      userAgent: "Mozilla/5.0 (Windows NT 10.0; Win64; x64)",
      status: 200,
    });
  });

  it("splits an IPv6 client from its port, and reads - as no user agent", () => {
    expect(records[1]).toMatchObject({
      ip: "2001:db8::5",
      method: "POST",
      path: "/api/export",
      userAgent: undefined,
      status: 429,
    });
  });

  it('counts a "- - - " request (unreadable by the balancer) as malformed', () => {
    expect(records).toHaveLength(2);
    expect(failures.get(3)).toMatch(/not METHOD URL PROTOCOL/);
  });
});

describe("nginx/Apache combined and common", () => {
  it("combined: time zones, escaped quotes, user, IPv6 and mapped clients", () => {
    const { format, records, failures } = parseFixture("combined.log", undefined, {
      userField: "remote_user",
    });
    expect(format).toBe("combined");
    expect(records.map((record) => record.time)).toEqual([
      at("2024-05-01T10:00:00Z"),
      at("2024-05-01T10:00:01Z"),
      at("2024-05-01T10:00:02Z"),
    ]);
    expect(records[0]).toMatchObject({
      ip: "203.0.113.7",
      path: "/api/search?q=x",
      userAgent: 'Mozilla/5.0 (X11; Linux x86_64) "quoted" AppleWebKit/537.36',
      status: 200,
      user: undefined,
    });
    expect(records[1]).toMatchObject({
      ip: "2001:db8:85a3::8a2e:370:7334",
      method: "POST",
      path: "/api/%72eports",
      user: "alice",
    });
    expect(records[2]).toMatchObject({ ip: "::ffff:198.51.100.20", userAgent: undefined });
    expect(failures.get(4)).toMatch(/not METHOD TARGET PROTOCOL/);
    expect(failures.get(5)).toMatch(/expected host ident user/);
  });

  it("common: no referer or user agent", () => {
    const { format, records } = parseFixture("common.log");
    expect(format).toBe("common");
    expect(records[1]).toMatchObject({
      ip: "2001:db8::1",
      path: "/api/export?format=csv",
      userAgent: undefined,
      status: 200,
    });
  });
});

describe("Cloudflare Logpush and generic JSON lines", () => {
  it("Cloudflare: RFC 3339 and Unix-nanosecond timestamps, URI with query", () => {
    const { format, records, failures } = parseFixture("cloudflare.jsonl");
    expect(format).toBe("cloudflare");
    expect(records[0]).toMatchObject({
      time: at("2024-05-01T10:00:00Z"),
      ip: "203.0.113.7",
      path: "/api/search?q=rate%20limit",
      userAgent: "Mozilla/5.0 (Macintosh)",
      status: 200,
    });
    expect(records[1]).toMatchObject({
      time: at("2024-05-01T10:00:01Z"),
      ip: "2001:db8:85a3::8a2e:370:7334",
      userAgent: undefined,
    });
    expect(failures.get(3)).toMatch(/no usable time/);
    expect(failures.get(4)).toBe("invalid JSON");
  });

  it("generic JSON through a field map, nested fields and a user", () => {
    const { format, records } = parseFixture("generic.jsonl", "json", {
      fields: {
        ip: "client.ip",
        time: "ts",
        method: "req.method",
        path: "req.url",
        query: "req.query",
        userAgent: "ua",
      },
      userField: "account.id",
      planField: "account.tier",
    });
    expect(format).toBe("json");
    expect(records[0]).toMatchObject({
      time: 1714557600250,
      ip: "203.0.113.7",
      path: "/api/search?q=1",
      userAgent: "k6/0.50",
      user: "u_42",
      plan: "pro",
    });
    expect(records[1]).toMatchObject({ method: "DELETE", path: "/api/items/7", user: undefined });
  });
});

describe("format names", () => {
  it("an unknown format names the formats it knows", () => {
    expect(() => formatNamed("w3c")).toThrow(
      /unknown format "w3c"; the formats are cloudfront, alb, combined, common, cloudflare, json/,
    );
    expect(() => detectFormat(["hello world"], "x.log")).toThrow(
      /give --format, one of cloudfront/,
    );
    expect(FORMATS.map((f) => f.name)).toHaveLength(6);
  });
});

describe("lines cut off after their required fields", () => {
  const parse = (format: string, line: string) =>
    formatNamed(format)
      .create({ fields: {}, userField: undefined, planField: undefined })
      .parse(line, 7);

  it("combined: a user agent without its closing quote is replayed, said to be truncated", () => {
    const line =
      '203.0.113.9 - - [01/May/2024:10:00:00 +0000] "GET /api/search?q=1 HTTP/1.1" 200 512 "-" "Mozilla/5.0 (X11; Lin';
    expect(parse("combined", line)).toMatchObject({
      ip: "203.0.113.9",
      time: at("2024-05-01T10:00:00Z"),
      method: "GET",
      path: "/api/search?q=1",
      status: 200,
      userAgent: "Mozilla/5.0 (X11; Lin",
      truncated: "cut off: no user agent's end (no closing quote)",
      line: 7,
    });
    // Cut anywhere after the request: still replayed; what is missing is said.
    const head = '203.0.113.9 - - [01/May/2024:10:00:00 +0000] "GET / HTTP/1.1"';
    expect(parse("combined", `${head} 200 512 "https://exa`)).toMatchObject({
      status: 200,
      truncated: "cut off: no referer (no closing quote), user agent",
    });
    expect(parse("combined", `${head} 200 512 "-"`)).toMatchObject({
      truncated: "cut off: no user agent",
    });
    expect(parse("combined", `${head} 20`)).toMatchObject({
      status: undefined,
      truncated: "cut off: no bytes, referer, user agent",
    });
    expect(parse("common", head)).toMatchObject({
      path: "/",
      truncated: "cut off: no status, bytes",
    });
    // A whole line is not truncated; one cut inside the request is malformed; one that goes on
    // with something else than the combined fields is malformed.
    expect(parse("combined", `${head} 200 512 "-" "curl/8"`)).toMatchObject({
      truncated: undefined,
    });
    expect(parse("combined", `${head.slice(0, -10)}`)).toEqual({
      failure: "unterminated request field",
    });
    expect(parse("combined", `${head} 200 512 - "curl/8"`)).toEqual({
      failure: 'expected "referer" "user agent" after status and bytes (combined)',
    });
  });

  it("ALB: a user agent cut off is truncated; a request cut off is malformed", () => {
    const line = readFileSync(fixture("alb.log"), "utf8").split("\n")[0] as string;
    const agent = line.indexOf('"Mozilla');
    expect(parse("alb", line.slice(0, agent + 12))).toMatchObject({
      path: "/api/search?q=a%20b",
      userAgent: "Mozilla/5.0",
      truncated: "cut off: no user agent's end (no closing quote)",
    });
    expect(parse("alb", line.slice(0, agent - 1))).toMatchObject({
      userAgent: undefined,
      truncated: "cut off: no user agent",
    });
    expect(parse("alb", line.slice(0, agent - 10))).toMatchObject({
      failure: expect.stringMatching(/expected 14 ALB fields/),
    });
    expect(parse("alb", line)).toMatchObject({ truncated: undefined });
  });

  it("CloudFront: a line missing columns that are read after the required ones is truncated", () => {
    const lines = readFileSync(fixture("cloudfront.log"), "utf8").split("\n");
    const parser = formatNamed("cloudfront").create({
      fields: {},
      userField: undefined,
      planField: undefined,
    });
    const first = lines.findIndex((text) => !text.startsWith("#"));
    for (const header of lines.slice(0, first)) parser.parse(header, 0);
    const whole = lines[first] as string;
    const cells = whole.split("\t");
    expect(parser.parse(whole, 1)).toMatchObject({ truncated: undefined });
    expect(parser.parse(cells.slice(0, 9).join("\t"), 2)).toMatchObject({
      status: Number(cells[8]),
      userAgent: undefined,
      truncated: "cut off after 9 fields",
    });
  });
});
