/**
 * The real `edgelimit serve` CLI in front of an origin, with per-path rules written in the
 * policy as users write them: a non-ASCII key matches however the client escapes the path, and
 * no casing or escape of a limited path reaches the origin past the limit.
 */
import type { ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type StartedServe, startServe } from "../support/serve-process.js";
import { HOUR_MS, withinOneWindow } from "../support/windows.js";
import { startOrigin, type TestServer } from "./helpers.js";

/**
 * Hour windows: a test needs some 10 s in one window, which only an hour's last 10 s do not
 * leave, where a minute's last 10 s are a sixth of every minute.
 */
const POLICY = `version: 1
identity:
  ip: { source: x-forwarded-for, trustedProxies: [127.0.0.0/8] }
defaults:
  window: 1h
tiers:
  anonymous:
    global: 1000
    paths:
      /préférences: 5
      /商品/: 5
      /api/export: 3
`;

const dir = mkdtempSync(join(tmpdir(), "edgelimit-gw-paths-"));
let origin: TestServer;
let served: StartedServe | undefined;
let child: ChildProcess | undefined;
let base: string;
/** Requests the origin was reached with, by path as received. */
const reached: string[] = [];

beforeAll(async () => {
  origin = await startOrigin((req, res) => {
    reached.push(req.url ?? "");
    res.writeHead(200, { "content-type": "text/plain" });
    res.end("origin");
  });
  const policy = join(dir, "policy.yaml");
  writeFileSync(policy, POLICY);
  served = await startServe({ policy, upstream: origin.url, args: ["--log-sample", "0"] });
  base = served.base;
  child = served.child;
}, 30_000);

afterAll(async () => {
  if (child !== undefined && child.exitCode === null) {
    child.kill("SIGKILL");
    await new Promise((resolve) => child?.once("exit", resolve));
  }
  await origin?.close();
  rmSync(dir, { recursive: true, force: true });
});

async function statusesOf(paths: readonly string[], client: string): Promise<number[]> {
  const statuses: number[] = [];
  for (const path of paths) {
    const response = await fetch(`${base}${path}`, { headers: { "x-forwarded-for": client } });
    await response.arrayBuffer();
    statuses.push(response.status);
  }
  return statuses;
}

/** One request whose request line carries `path` as raw bytes (UTF-8 unescaped), its status. */
function rawStatus(path: Buffer, client: string): Promise<number> {
  const { hostname, port } = new URL(base);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), hostname);
    let answer = "";
    socket.setEncoding("latin1");
    socket.on("data", (chunk: string) => {
      answer += chunk;
      const status = /^HTTP\/1\.1 (\d{3})/.exec(answer);
      if (status !== null) {
        socket.destroy();
        resolve(Number(status[1]));
      }
    });
    socket.on("error", reject);
    socket.write(
      Buffer.concat([
        Buffer.from("GET "),
        path,
        Buffer.from(
          ` HTTP/1.1\r\nHost: ${hostname}\r\nX-Forwarded-For: ${client}\r\nConnection: close\r\n\r\n`,
        ),
      ]),
    );
  });
}

describe("edgelimit serve: a rule's path, however the client spells it", () => {
  it("refuses a request line that carries /préférences as raw UTF-8 (Node's parser: 400), so it never reaches the origin unmatched", async () => {
    const before = reached.length;
    expect(await rawStatus(Buffer.from("/préférences", "utf8"), "198.51.100.63")).toBe(400);
    expect(reached.length).toBe(before);
  });

  it("limits /préférences to 5, in any escaping, with the rule named in the headers", async () => {
    await withinOneWindow(HOUR_MS, 10_000);
    const spellings = [
      "/pr%C3%A9f%C3%A9rences",
      "/pr%c3%a9f%c3%a9rences",
      "/pr%C3%a9f%c3%A9rences/",
      "/pr%C3%A9f%C3%A9rences?tab=1",
      "/pr%C3%A9f%C3%A9r%65nces",
      "/pr%C3%A9f%C3%A9rences",
      "/pr%c3%a9f%c3%a9rences",
    ];
    const before = reached.length;
    expect(await statusesOf(spellings, "198.51.100.60")).toEqual([
      200, 200, 200, 200, 200, 429, 429,
    ]);
    expect(reached.length - before).toBe(5);
    const refused = await fetch(`${base}/pr%C3%A9f%C3%A9rences`, {
      headers: { "x-forwarded-for": "198.51.100.60" },
    });
    expect(refused.status).toBe(429);
    expect(refused.headers.get("ratelimit")).toMatch(
      /^"anonymous\.path\.\/pr%C3%A9f%C3%A9rences";r=0;t=\d+$/,
    );
  });

  it("limits everything under /商品/ to 5", async () => {
    await withinOneWindow(HOUR_MS, 10_000);
    const paths = Array.from({ length: 7 }, (_, i) =>
      i % 2 === 0 ? `/%E5%95%86%E5%93%81/${i}` : `/%e5%95%86%e5%93%81/${i}`,
    );
    expect(await statusesOf(paths, "198.51.100.61")).toEqual([200, 200, 200, 200, 200, 429, 429]);
  });

  it("limits /api/export to 3 in every letter case: the origin behind is not known", async () => {
    await withinOneWindow(HOUR_MS, 10_000);
    const before = reached.length;
    expect(
      await statusesOf(
        [
          "/API/EXPORT",
          "/Api/Export",
          "/api/EXPORT",
          "/API/export",
          "/api/%45xport",
          "/api/export",
        ],
        "198.51.100.62",
      ),
    ).toEqual([200, 200, 200, 429, 429, 429]);
    expect(reached.length - before).toBe(3);
  });
});
