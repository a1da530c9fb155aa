import { mkdtempSync, rmSync } from "node:fs";
import { createServer, type IncomingHttpHeaders } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { JWT_SECRET, signToken } from "../support/jwt.js";
import { loopbackServers } from "../support/listen.js";
import { withinOneWindow } from "../support/windows.js";
import { type RlsProcess, startRls } from "./harness.js";
import { PROXY_NAMES, type ProxyKind, ProxyLauncher } from "./proxy-servers.js";

/**
 * Real nginx (auth_request), Caddy (forward_auth) and HAProxy (a Lua action) from Debian, in
 * front of an app, asking one `edgelimit rls --policy examples/policies/cloudfront.yaml` at
 * `/check/PROXY`, each with its configuration from examples/rls/ as docs/forward-auth.md shows it (only
 * the ports changed: proxy-servers.ts). The seed policy: anonymous `/api/export` is 3 a minute;
 * a user with a JWT gets the authenticated limits (20 a minute there).
 */

const dir = mkdtempSync(join(tmpdir(), "edgelimit-proxies-"));
const listen = loopbackServers();
const launcher = new ProxyLauncher(dir);
const seen: IncomingHttpHeaders[] = [];
let appPort: number;
let rls: RlsProcess;

beforeAll(async () => {
  const app = await listen(
    createServer((req, res) => {
      seen.push(req.headers);
      res.writeHead(200, { "content-type": "text/plain" });
      res.end(`app ${req.url}`);
    }),
  );
  appPort = Number(new URL(app).port);
  rls = await startRls(["--policy", "examples/policies/cloudfront.yaml"], {
    env: { EDGELIMIT_JWT_SECRET: JWT_SECRET, EDGELIMIT_CHALLENGE_SECRET: JWT_SECRET },
  });
}, 30_000);

afterAll(async () => {
  await launcher.stopAll();
  await rls?.stop();
  rmSync(dir, { recursive: true, force: true });
});

const KINDS: readonly ProxyKind[] = ["nginx", "caddy", "haproxy"];

describe.each(KINDS.map((kind, index) => ({ kind, name: PROXY_NAMES[kind], index })))(
  "$name in front of an app, asking edgelimit rls",
  ({ kind, index }) => {
    let url: string;
    beforeAll(async () => {
      url = await launcher.start(kind, { appPort, rlsPort: rls.httpPort });
    }, 30_000);

    it("gives anonymous /api/export 200, 200, 200, then 429 with Retry-After", async () => {
      const client = `203.0.113.${10 + index}`;
      // The seed's minute windows: the Retry-After below is at most the window's 60 s.
      await withinOneWindow(60_000, 5_000);
      const statuses: number[] = [];
      let refused: Response | undefined;
      for (let i = 0; i < 4; i++) {
        const response = await fetch(`${url}/api/export`, {
          headers: { "x-forwarded-for": client },
        });
        statuses.push(response.status);
        if (response.status === 429) refused = response;
        else await response.arrayBuffer();
      }
      expect(statuses).toEqual([200, 200, 200, 429]);
      const retryAfter = Number(refused?.headers.get("retry-after"));
      expect(retryAfter).toBeGreaterThanOrEqual(1);
      expect(retryAfter).toBeLessThanOrEqual(60);
      expect(JSON.parse((await refused?.text()) ?? "{}")).toMatchObject({
        error: "rate_limit_exceeded",
      });
    });

    it("holds a user with a JWT to the authenticated limits, and tells the app and the client", async () => {
      await withinOneWindow(60_000, 5_000);
      const token = await signToken({ sub: `user-${index}`, plan: "pro" });
      const before = seen.length;
      const response = await fetch(`${url}/api/export`, {
        headers: { authorization: `Bearer ${token}`, "x-forwarded-for": `203.0.113.${20 + index}` },
      });
      expect(response.status).toBe(200);
      expect(await response.text()).toBe("app /api/export");
      expect(seen.slice(before).map((headers) => headers["x-ratelimit-remaining"])).toEqual(["19"]);
      expect(response.headers.get("x-ratelimit-limit")).toBe("20");
      expect(response.headers.get("x-ratelimit-remaining")).toBe("19");
    });
  },
);

describe("examples/rls/Caddyfile with an address written in", () => {
  it("still serves plain HTTP, as docs/forward-auth.md says (a site without http:// would be HTTPS)", async () => {
    const url = await launcher.start(
      "caddy",
      { appPort, rlsPort: rls.httpPort },
      { host: "127.0.0.1" },
    );
    const response = await fetch(`${url}/api/search`, {
      headers: { "x-forwarded-for": "203.0.113.40" },
    });
    expect(response.status).toBe(200);
    expect(await response.text()).toBe("app /api/search");
  });
});

describe("HAProxy's action, asking an rls that cannot decide (started without --policy)", () => {
  it("answers 500, never a pass", async () => {
    const undecided = await startRls(["--config", "test/rls/fixtures/small.yaml"]);
    try {
      const before = seen.length;
      const url = await launcher.start("haproxy", { appPort, rlsPort: undecided.httpPort });
      const response = await fetch(`${url}/api/search`);
      expect(response.status).toBe(500);
      expect(seen.length).toBe(before);
    } finally {
      await undecided.stop();
    }
  }, 90_000);
});
