import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer, request } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { closedPort } from "../gateway/helpers.js";
import { JWT_SECRET } from "../support/jwt.js";
import { loopbackServers } from "../support/listen.js";
import { HOUR_MS, withHourWindows, withinOneWindow } from "../support/windows.js";
import { type RlsProcess, startRls } from "./harness.js";
import { PROXY_NAMES, type ProxyKind, ProxyLauncher } from "./proxy-servers.js";

/**
 * A client that writes every header a proxy could use to describe the request it holds, through
 * Debian's nginx, Caddy and HAProxy with their configurations from examples/rls/ (only the ports
 * changed), in front of `edgelimit rls` with the seed policy. The client connects from
 * 127.0.0.2 and up, which the policy does not trust: only the proxies, on 127.0.0.1, are its
 * trusted proxies, so nothing the client writes may change what is counted.
 */

const dir = mkdtempSync(join(tmpdir(), "edgelimit-forged-"));
const listen = loopbackServers();
const launcher = new ProxyLauncher(dir);
/** What reached the app: method and URL of each request. */
const reached: string[] = [];
let appPort: number;
/** rls with a memory store, and rls whose Redis is not listening. */
let counting: RlsProcess;
let storeDown: RlsProcess;

/**
 * The seed policy, trusting only the proxies' own address, with a POST-only /login limit; its
 * windows an hour, so that a test (some 15 s through three proxies on a busy machine) waits for
 * a fresh window only in an hour's last 15 s, not in every minute's.
 */
function policyFile(): string {
  const seed = readFileSync("examples/policies/cloudfront.yaml", "utf8");
  const trusted = 'trustedProxies: [127.0.0.0/8, "::1/128"]';
  if (!seed.includes(trusted)) throw new Error(`the seed policy no longer says ${trusted}`);
  const file = join(dir, "policy.yaml");
  writeFileSync(
    file,
    withHourWindows(`${seed.replace(trusted, "trustedProxies: [127.0.0.1/32]")}
namespaces:
  login:
    match: { path: /login, methods: [POST] }
    key: ip
    limit: 3
    window: 60s
`),
  );
  return file;
}

beforeAll(async () => {
  const app = await listen(
    createServer((req, res) => {
      reached.push(`${req.method} ${req.url}`);
      res.writeHead(200, { "content-type": "text/plain" });
      res.end(`app ${req.url}`);
    }),
  );
  appPort = Number(new URL(app).port);
  const policy = policyFile();
  const env = { EDGELIMIT_JWT_SECRET: JWT_SECRET, EDGELIMIT_CHALLENGE_SECRET: JWT_SECRET };
  [counting, storeDown] = await Promise.all([
    startRls(["--policy", policy], { env }),
    startRls(["--policy", policy, "--store", `redis://127.0.0.1:${await closedPort()}`], { env }),
  ]);
}, 60_000);

afterAll(async () => {
  await launcher.stopAll();
  await Promise.all([counting?.stop(), storeDown?.stop()]);
  rmSync(dir, { recursive: true, force: true });
});

/** Every header that could describe the original request, each saying something else. */
function forgedHeaders(attempt: number): Record<string, string> {
  const elsewhere = `198.51.100.${attempt + 1}`;
  return {
    "x-forwarded-uri": "/public",
    "x-forwarded-method": "GET",
    "x-original-uri": "/public",
    "x-original-method": "GET",
    "x-forwarded-for": elsewhere,
    "x-real-ip": elsewhere,
    "x-forwarded-host": "elsewhere.example",
    "x-forwarded-proto": "https",
    forwarded: `for=${elsewhere};host=elsewhere.example;proto=https`,
  };
}

/** One request from `from` (a loopback address the policy does not trust); its status. */
function send(
  url: string,
  from: string,
  method: string,
  path: string,
  headers: Record<string, string> = {},
): Promise<number> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const outgoing = request(
      { host: hostname, port, method, path, headers, localAddress: from, agent: false },
      (response) => {
        response.resume();
        response.on("end", () => resolve(response.statusCode ?? 0));
      },
    );
    outgoing.on("error", reject);
    outgoing.end();
  });
}

const KINDS: readonly ProxyKind[] = ["nginx", "caddy", "haproxy"];
const FORGED_ATTEMPTS = 10;

/** `/api/export`'s 3 a window spent honestly, then 10 forged requests: each must be refused. */
async function spendExportThenForge(url: string, client: string): Promise<void> {
  await withinOneWindow(HOUR_MS, 15_000);
  const honest: number[] = [];
  for (let i = 0; i < 3; i++) honest.push(await send(url, client, "GET", "/api/export"));
  expect(honest).toEqual([200, 200, 200]);
  const before = reached.length;
  const forged: number[] = [];
  for (let i = 0; i < FORGED_ATTEMPTS; i++) {
    forged.push(await send(url, client, "GET", "/api/export/x", forgedHeaders(i)));
  }
  expect(forged).toEqual(Array(FORGED_ATTEMPTS).fill(429));
  expect(reached.slice(before)).toEqual([]);
}

describe.each(KINDS.map((kind, index) => ({ kind, name: PROXY_NAMES[kind], index })))(
  "$name, a client forging every forwarded header",
  ({ kind, index }) => {
    const client = `127.0.0.${2 + index}`;
    let url: string;
    let storeDownUrl: string;
    beforeAll(async () => {
      [url, storeDownUrl] = await Promise.all([
        launcher.start(kind, { appPort, rlsPort: counting.httpPort }),
        launcher.start(kind, { appPort, rlsPort: storeDown.httpPort }),
      ]);
    }, 30_000);

    it("is still refused once /api/export's 3 a window are spent", async () => {
      await spendExportThenForge(url, client);
    });

    it("does not escape a POST-only /login limit by saying GET", async () => {
      await withinOneWindow(HOUR_MS, 15_000);
      const honest: number[] = [];
      for (let i = 0; i < 3; i++) honest.push(await send(url, client, "POST", "/login"));
      expect(honest).toEqual([200, 200, 200]);
      const before = reached.length;
      const forged: number[] = [];
      for (let i = 0; i < FORGED_ATTEMPTS; i++) {
        forged.push(await send(url, client, "POST", "/login", forgedHeaders(i)));
      }
      expect(forged).toEqual(Array(FORGED_ATTEMPTS).fill(429));
      expect(reached.slice(before)).toEqual([]);
    });

    it("gets 503 on a fail-closed path while the store is down, whatever it says the path is", async () => {
      const before = reached.length;
      expect(await send(storeDownUrl, client, "GET", "/api/admin/x")).toBe(503);
      expect(await send(storeDownUrl, client, "GET", "/api/admin/x", forgedHeaders(0))).toBe(503);
      expect(reached.slice(before)).toEqual([]);
    });
  },
);

describe("nginx with only the headers /check/nginx reads set (the lines clearing the others dropped)", () => {
  let url: string;
  beforeAll(async () => {
    url = await launcher.start(
      "nginx",
      { appPort, rlsPort: counting.httpPort },
      {
        withoutLines: [
          'proxy_set_header X-Forwarded-Uri "";',
          'proxy_set_header X-Forwarded-Method "";',
          'proxy_set_header X-Real-IP "";',
        ],
      },
    );
  }, 30_000);

  it("still counts the path nginx names, not the X-Forwarded-Uri the client wrote", async () => {
    await spendExportThenForge(url, `127.0.0.${2 + KINDS.length}`);
  });
});
