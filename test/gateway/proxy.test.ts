import { createHash, randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import { request as httpRequest } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Gateway } from "../../src/gateway/server.js";
import { parsePolicy } from "../../src/policy/load.js";
import { withHourWindows } from "../support/windows.js";
import {
  capturingLogger,
  closedPort,
  startOrigin,
  type TestServer,
  testGateway,
} from "./helpers.js";

// The seed's windows made an hour: the scraper's 125 requests, sequential, once crossed a
// minute's end on a loaded machine and were counted afresh (72 admitted of a limit of 60).
const policy = parsePolicy(
  withHourWindows(readFileSync("examples/policies/cloudfront.yaml", "utf8")),
  "examples/policies/cloudfront.yaml",
);

/** What the origin saw of each request, by the test's own request id. */
const seen = new Map<
  string,
  {
    method: string;
    url: string;
    headers: Record<string, unknown>;
    bodySha: string;
    bodyBytes: number;
  }
>();

let origin: TestServer;
let gateway: Gateway;
let base: string;
let adminBase: string;
const { logger, lines } = capturingLogger();

beforeAll(async () => {
  origin = await startOrigin((req, res) => {
    const hash = createHash("sha256");
    let bytes = 0;
    req.on("data", (chunk: Buffer) => {
      hash.update(chunk);
      bytes += chunk.length;
    });
    req.on("end", () => {
      const id = String(req.headers["x-test-id"] ?? "");
      const bodySha = hash.digest("hex");
      seen.set(id, {
        method: req.method ?? "",
        url: req.url ?? "",
        headers: { ...req.headers },
        bodySha,
        bodyBytes: bytes,
      });
      const url = new URL(req.url ?? "/", "http://origin");
      if (url.pathname === "/status") {
        const code = Number(url.searchParams.get("code"));
        res.writeHead(code, { "content-type": "text/plain", "x-origin": "yes" });
        res.end(code === 204 || code === 304 ? undefined : `status ${code}`);
        return;
      }
      if (url.pathname === "/echo") {
        res.writeHead(200, { "content-type": "application/octet-stream", "x-body-sha": bodySha });
        // Echo the upload back in full, as a download of the same size.
        res.end(Buffer.alloc(bytes, 7));
        return;
      }
      if (url.pathname === "/stream") {
        res.writeHead(200, {
          "content-type": "text/plain",
          connection: "keep-alive, x-private-hop",
          "x-private-hop": "secret",
          "keep-alive": "timeout=77",
        });
        let sent = 0;
        const timer = setInterval(() => {
          res.write(`chunk ${sent}\n`);
          if (++sent === 5) {
            clearInterval(timer);
            res.end();
          }
        }, 60);
        return;
      }
      if (url.pathname === "/slow") {
        setTimeout(
          () => {
            res.writeHead(200, { "content-type": "text/plain" });
            res.end("slow answer");
          },
          Number(url.searchParams.get("ms") ?? 300),
        );
        return;
      }
      res.writeHead(200, {
        "content-type": "application/json",
        "set-cookie": ["a=1", "b=2"],
        // An origin's own rate-limit header: the gateway's replaces it (never both).
        "x-ratelimit-limit": "999",
      });
      res.end(JSON.stringify({ ok: true }));
    });
  });
  gateway = testGateway(origin.url, {
    policy,
    logger,
    allowedLogSampleRate: 0,
    upstreamTimeoutMs: 1_000,
  });
  const started = await gateway.start();
  base = started.url.replace(/\/$/, "");
  adminBase = (started.adminUrl as string).replace(/\/$/, "");
});

afterAll(async () => {
  await gateway?.close();
  await origin?.close();
});

/** Each test simulates its own client IP (the policy trusts X-Forwarded-For from loopback). */
function from(ip: string, extra: Record<string, string> = {}): Record<string, string> {
  return { "x-forwarded-for": ip, ...extra };
}

describe("proxying", () => {
  it("forwards method, path, query and headers, appends X-Forwarded-For and strips hop-by-hop headers", async () => {
    const response = await fetch(`${base}/api/items/7?sort=desc&x=1`, {
      method: "PUT",
      headers: from("198.51.100.1", {
        "x-test-id": "headers",
        "x-custom": "kept",
        "x-ratelimit-remaining-origin": "999999",
        "content-type": "application/json",
      }),
      body: JSON.stringify({ a: 1 }),
    });
    expect(response.status).toBe(200);
    const origin = seen.get("headers");
    expect(origin?.method).toBe("PUT");
    expect(origin?.url).toBe("/api/items/7?sort=desc&x=1");
    expect(origin?.headers["x-custom"]).toBe("kept");
    expect(origin?.headers["x-forwarded-for"]).toBe("198.51.100.1, 127.0.0.1");
    // The client's copy of the origin header is replaced by the gateway's count (60 - 1).
    expect(origin?.headers[policy.headers.origin.toLowerCase()]).toBe("59");
    expect(origin?.bodySha).toBe(
      createHash("sha256")
        .update(JSON.stringify({ a: 1 }))
        .digest("hex"),
    );
    // Rate-limit headers to the client, upstream headers kept (two cookies stay two); the
    // origin's own X-RateLimit-Limit is replaced, not sent beside ours ("999, 60").
    expect(response.headers.get("x-ratelimit-limit")).toBe("60");
    expect(response.headers.get("x-ratelimit-remaining")).toBe("59");
    expect(response.headers.get("ratelimit")).toMatch(/^"anonymous.global";r=59;t=\d+$/);
    expect(response.headers.getSetCookie()).toEqual(["a=1", "b=2"]);
  });

  it("never lets a client choose the remaining count the origin sees", async () => {
    const headerName = policy.headers.origin;
    await fetch(`${base}/`, {
      headers: from("198.51.100.2", { "x-test-id": "spoof", [headerName]: "1000" }),
    });
    expect(seen.get("spoof")?.headers[headerName.toLowerCase()]).toBe("59");
  });

  it("streams a large upload and a large download intact", async () => {
    const upload = randomBytes(8 * 1024 * 1024);
    const response = await fetch(`${base}/echo`, {
      method: "POST",
      headers: from("198.51.100.3", {
        "x-test-id": "large",
        "content-type": "application/octet-stream",
      }),
      body: upload,
    });
    expect(response.status).toBe(200);
    expect(response.headers.get("x-body-sha")).toBe(
      createHash("sha256").update(upload).digest("hex"),
    );
    const download = Buffer.from(await response.arrayBuffer());
    expect(download.length).toBe(upload.length);
    expect(seen.get("large")?.bodyBytes).toBe(upload.length);
  });

  it("streams a chunked upload without a content length", async () => {
    const parts = [randomBytes(100_000), randomBytes(200_000), randomBytes(50_000)];
    const body = new ReadableStream<Uint8Array>({
      async pull(controller) {
        const next = parts.shift();
        if (next === undefined) controller.close();
        else {
          await new Promise((resolve) => setTimeout(resolve, 20));
          controller.enqueue(next);
        }
      },
    });
    const expected = createHash("sha256");
    for (const part of parts) expected.update(part);
    const expectedSha = expected.digest("hex");
    const response = await fetch(`${base}/echo`, {
      method: "POST",
      headers: from("198.51.100.4", { "x-test-id": "chunked" }),
      body,
      duplex: "half",
    } as RequestInit);
    expect(response.status).toBe(200);
    expect(seen.get("chunked")?.bodySha).toBe(expectedSha);
    expect(seen.get("chunked")?.headers["transfer-encoding"]).toBe("chunked");
  });

  it("streams a response as the origin writes it, without its hop-by-hop headers", async () => {
    const started = Date.now();
    const response = await fetch(`${base}/stream`, { headers: from("198.51.100.5") });
    expect(response.headers.get("x-private-hop")).toBeNull();
    // The gateway speaks for its own connection (Node adds its keep-alive), never the origin's.
    expect(response.headers.get("keep-alive")).not.toBe("timeout=77");
    const reader = (response.body as ReadableStream<Uint8Array>).getReader();
    const first = await reader.read();
    const firstAt = Date.now() - started;
    let text = new TextDecoder().decode(first.value);
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      text += new TextDecoder().decode(value);
    }
    const totalMs = Date.now() - started;
    expect(text).toBe("chunk 0\nchunk 1\nchunk 2\nchunk 3\nchunk 4\n");
    // The first chunk arrived well before the origin finished (5 chunks, 60 ms apart).
    expect(firstAt).toBeLessThan(totalMs - 150);
  });

  it("passes the origin's status codes through", async () => {
    for (const code of [201, 204, 302, 404, 500, 503]) {
      const response = await fetch(`${base}/status?code=${code}`, {
        headers: from("198.51.100.6"),
        redirect: "manual",
      });
      expect(response.status).toBe(code);
      expect(response.headers.get("x-origin")).toBe("yes");
      await response.arrayBuffer();
    }
  });

  it("waits for a slow origin and answers 504 when it exceeds the upstream timeout", async () => {
    const slow = await fetch(`${base}/slow?ms=300`, { headers: from("198.51.100.7") });
    expect(slow.status).toBe(200);
    expect(await slow.text()).toBe("slow answer");
    const tooSlow = await fetch(`${base}/slow?ms=2500`, { headers: from("198.51.100.7") });
    expect(tooSlow.status).toBe(504);
    expect(await tooSlow.json()).toMatchObject({ error: "upstream_timeout" });
  });

  it("answers 502 JSON when the upstream is down, and keeps serving", async () => {
    const port = await closedPort();
    const down = testGateway(`http://127.0.0.1:${port}`, { adminPort: false });
    const { url } = await down.start();
    try {
      for (let i = 0; i < 3; i++) {
        const response = await fetch(`${url}api/search`, { headers: from("198.51.100.8") });
        expect(response.status).toBe(502);
        expect(response.headers.get("content-type")).toContain("application/json");
        expect(await response.json()).toMatchObject({ error: "bad_gateway" });
      }
      const metrics = await down.metrics.text();
      expect(metrics).toContain('edgelimit_upstream_errors_total{kind="connect"} 3');
    } finally {
      await down.close();
    }
  });

  it("survives a client that hangs up mid-upload", async () => {
    await new Promise<void>((resolve) => {
      const { port } = new URL(base);
      const req = httpRequest({
        host: "127.0.0.1",
        port: Number(port),
        method: "POST",
        path: "/echo",
        headers: { "content-length": "1000000", "x-forwarded-for": "198.51.100.9" },
      });
      req.on("error", () => resolve());
      req.write(Buffer.alloc(1000));
      setTimeout(() => {
        req.destroy();
        resolve();
      }, 100);
    });
    const after = await fetch(`${base}/`, { headers: from("198.51.100.9") });
    expect(after.status).toBe(200);
  });
});

describe("the seed's incident: one scraper, everyone else unaffected", () => {
  it("blocks one IP past its per-path limit while another IP on the same path passes", async () => {
    const scraper = "203.0.113.66";
    const statuses: number[] = [];
    for (let i = 0; i < 12; i++) {
      const response = await fetch(`${base}/api/reports`, { headers: from(scraper) });
      statuses.push(response.status);
      if (response.status === 429) {
        expect(response.headers.get("retry-after")).toMatch(/^\d+$/);
        expect(Number(response.headers.get("retry-after"))).toBeGreaterThan(0);
        expect(response.headers.get("cache-control")).toBe("no-store");
        expect(await response.json()).toMatchObject({ error: "rate_limit_exceeded" });
      } else {
        await response.arrayBuffer();
      }
    }
    expect(statuses).toEqual([200, 200, 200, 200, 200, 429, 429, 429, 429, 429, 429, 429]);

    const bystander = await fetch(`${base}/api/reports`, { headers: from("203.0.113.67") });
    expect(bystander.status).toBe(200);
    expect(bystander.headers.get("x-ratelimit-remaining")).toBe("4");
  });

  it("counts a request on its path rule and on the global rule together", async () => {
    const client = "203.0.113.80";
    // 58 requests elsewhere spend 58 of the 60-per-minute anonymous global limit.
    for (let i = 0; i < 58; i++) {
      const response = await fetch(`${base}/home`, { headers: from(client) });
      expect(response.status).toBe(200);
      await response.arrayBuffer();
    }
    // /api/reports allows 5, but the global limit has only 2 left: then the challenge band.
    const statuses: number[] = [];
    for (let i = 0; i < 3; i++) {
      const response = await fetch(`${base}/api/reports`, {
        headers: from(client),
        redirect: "manual",
      });
      statuses.push(response.status);
      if (response.status === 302)
        expect(response.headers.get("location")).toBe("/captcha?redirect=%2Fapi%2Freports");
      await response.arrayBuffer();
    }
    expect(statuses).toEqual([200, 200, 302]);
  });

  it("challenges past the global limit, then blocks beyond twice the limit", async () => {
    const client = "203.0.113.90";
    const counts: Record<number, number> = {};
    for (let i = 0; i < 125; i++) {
      const response = await fetch(`${base}/catalog/${i}`, {
        headers: from(client),
        redirect: "manual",
      });
      counts[response.status] = (counts[response.status] ?? 0) + 1;
      await response.arrayBuffer();
    }
    // Refused attempts count too: the 120th request reaches 2x the limit and is blocked.
    expect(counts).toEqual({ 200: 60, 302: 59, 429: 6 });
  });

  it("logs every refusal, shows the scraper as the top offender, and counts decisions in /metrics", async () => {
    const blocks = lines.filter((line) => line.msg === "decision" && line.action === "block");
    expect(blocks.length).toBeGreaterThanOrEqual(12);
    expect(blocks.some((line) => line.subject === "ip:203.0.113.66" && line.status === 429)).toBe(
      true,
    );
    // Allowed decisions are not sampled in this gateway (rate 0).
    expect(lines.some((line) => line.msg === "decision" && line.action === "allow")).toBe(false);

    const snapshot = (await (await fetch(`${adminBase}/api/snapshot`)).json()) as {
      topOffenders: { key: string; count: number }[];
      totals: Record<string, number>;
    };
    expect(snapshot.topOffenders[0]).toMatchObject({ key: "ip:203.0.113.90", count: 65 });
    expect(snapshot.topOffenders.find((entry) => entry.key === "ip:203.0.113.66")?.count).toBe(7);
    expect(snapshot.totals.block).toBe(13);
    expect(snapshot.totals.challenge).toBe(60);

    const metrics = await (await fetch(`${adminBase}/metrics`)).text();
    expect(metrics).toContain(
      'edgelimit_decisions_total{action="block",reason="over-limit",tier="anonymous",rule="anonymous.path./api/reports",path="/api/reports"} 7',
    );
    expect(metrics).toContain(
      'edgelimit_decisions_total{action="challenge",reason="challenge-band",tier="anonymous",rule="anonymous.global",path="*"} 60',
    );
    expect(metrics).toMatch(/edgelimit_decision_duration_seconds_count \d+/);
    expect(metrics).toContain("edgelimit_failed_open_total 0");
    expect(metrics).toContain("edgelimit_failed_closed_total 0");
  });
});

describe("the admin listener", () => {
  it("serves health, metrics and the dashboard on the admin port only", async () => {
    const health = await fetch(`${adminBase}/healthz`);
    expect(health.status).toBe(200);
    expect(await health.json()).toMatchObject({ status: "ok" });
    const dashboard = await fetch(`${adminBase}/`);
    expect(await dashboard.text()).toContain('id="total-block"');
    const chart = await fetch(`${adminBase}/assets/uPlot.iife.min.js`);
    expect(chart.status).toBe(200);
    expect((await chart.text()).length).toBeGreaterThan(10_000);

    for (const path of [
      "/metrics",
      "/healthz",
      "/events",
      "/api/snapshot",
      "/assets/dashboard.js",
    ]) {
      const response = await fetch(`${base}${path}`, {
        headers: from("198.51.100.20", { "x-test-id": `public${path}` }),
      });
      // The public port forwards these like any other path: the origin answers, not the admin.
      expect(response.status).toBe(200);
      expect(await response.json()).toEqual({ ok: true });
      expect(seen.get(`public${path}`)?.url).toBe(path);
    }
  });

  it("binds the admin listener to loopback", () => {
    expect(adminBase).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
  });
});
