import { describe, expect, it } from "vitest";
import { DOCUMENTED_FIELDS } from "../../src/replay/formats/cloudfront.js";
import { detectFormat, FORMATS, formatNamed } from "../../src/replay/formats/index.js";
import { parseFixture } from "./helpers.js";

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
