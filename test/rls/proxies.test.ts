import { type ChildProcess, spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type IncomingHttpHeaders } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { closedPort } from "../gateway/helpers.js";
import { JWT_SECRET, signToken } from "../support/jwt.js";
import { loopbackServers } from "../support/listen.js";
import { withinOneWindow } from "../support/windows.js";
import { type RlsProcess, startRls } from "./harness.js";

/**
 * Real nginx (auth_request), Caddy (forward_auth) and HAProxy (a Lua action) from Debian, in
 * front of an app, asking one `edgelimit rls --policy examples/policies/cloudfront.yaml` through
 * `/check`, each with its configuration from examples/rls/ as docs/proxies.md shows it (only
 * the ports and paths changed). The seed policy: anonymous `/api/export` is 3 a minute; a user
 * with a JWT gets the authenticated limits (20 a minute there).
 */

const dir = mkdtempSync(join(tmpdir(), "edgelimit-proxies-"));
const listen = loopbackServers();
const seen: IncomingHttpHeaders[] = [];
let app: string;
let rls: RlsProcess;
const proxies: ChildProcess[] = [];

interface Proxy {
  readonly name: string;
  start(rlsPort: number): Promise<string>;
}

/** The example file with the documented addresses replaced by the test's. */
function example(
  name: string,
  rlsPort: number,
  replace: readonly [string | RegExp, string][] = [],
): string {
  let text = readFileSync(join("examples/rls", name), "utf8")
    .replaceAll("127.0.0.1:3000", app.replace("http://", ""))
    .replaceAll("127.0.0.1:8080", `127.0.0.1:${rlsPort}`);
  for (const [from, to] of replace) text = text.replace(from, to);
  return text;
}

/** Starts a proxy process and waits until its port answers. */
async function launch(
  command: string,
  args: string[],
  port: number,
  env: Record<string, string> = {},
): Promise<string> {
  let output = "";
  const child = spawn(command, args, {
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, ...env },
  });
  child.stdout?.on("data", (chunk: Buffer) => {
    output += chunk.toString();
  });
  child.stderr?.on("data", (chunk: Buffer) => {
    output += chunk.toString();
  });
  proxies.push(child);
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 15_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`${command} exited ${child.exitCode}:\n${output}`);
    try {
      await fetch(`${url}/ready`, { headers: { "x-forwarded-for": "192.0.2.250" } });
      return url;
    } catch {
      if (Date.now() > deadline)
        throw new Error(`${command} did not listen on ${port}:\n${output}`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }
}

const PROXIES: readonly Proxy[] = [
  {
    name: "nginx (auth_request)",
    async start(rlsPort) {
      const port = await closedPort();
      const prefix = join(dir, "nginx");
      mkdirSync(join(prefix, "logs"), { recursive: true });
      const conf = join(prefix, "nginx.conf");
      writeFileSync(
        conf,
        example("nginx.conf", rlsPort, [["listen 80;", `listen 127.0.0.1:${port};`]]),
      );
      return launch(
        "nginx",
        [
          "-p",
          prefix,
          "-c",
          conf,
          "-e",
          "stderr",
          "-g",
          `daemon off; pid ${join(prefix, "nginx.pid")};`,
        ],
        port,
      );
    },
  },
  {
    name: "Caddy (forward_auth)",
    async start(rlsPort) {
      const port = await closedPort();
      const home = join(dir, "caddy");
      mkdirSync(home, { recursive: true });
      const conf = join(home, "Caddyfile");
      writeFileSync(
        conf,
        example("Caddyfile", rlsPort, [[":80 {", `http://127.0.0.1:${port} {\n\tbind 127.0.0.1`]]),
      );
      return launch("caddy", ["run", "--config", conf, "--adapter", "caddyfile"], port, {
        HOME: home,
        XDG_DATA_HOME: home,
        XDG_CONFIG_HOME: home,
      });
    },
  },
  {
    name: "HAProxy (Lua action)",
    async start(rlsPort) {
      const port = await closedPort();
      const home = join(dir, "haproxy");
      mkdirSync(home, { recursive: true });
      writeFileSync(join(home, "edgelimit.lua"), example("edgelimit.lua", rlsPort));
      const conf = join(home, "haproxy.cfg");
      writeFileSync(
        conf,
        example("haproxy.cfg", rlsPort, [
          ["/etc/haproxy/edgelimit.lua", join(home, "edgelimit.lua")],
          ["bind :80", `bind 127.0.0.1:${port}`],
        ]),
      );
      return launch("haproxy", ["-f", conf, "-db"], port, {
        EDGELIMIT_CHECK_URL: `http://127.0.0.1:${rlsPort}/check`,
      });
    },
  },
];

beforeAll(async () => {
  app = await listen(
    createServer((req, res) => {
      seen.push(req.headers);
      res.writeHead(200, { "content-type": "text/plain" });
      res.end(`app ${req.url}`);
    }),
  );
  rls = await startRls(["--policy", "examples/policies/cloudfront.yaml"], {
    env: { EDGELIMIT_JWT_SECRET: JWT_SECRET, EDGELIMIT_CHALLENGE_SECRET: JWT_SECRET },
  });
}, 30_000);

afterAll(async () => {
  for (const child of proxies) child.kill("SIGTERM");
  await Promise.all(
    proxies.map((child) =>
      child.exitCode === null ? new Promise((resolve) => child.once("exit", resolve)) : null,
    ),
  );
  await rls?.stop();
  rmSync(dir, { recursive: true, force: true });
});

describe.each(PROXIES.map((proxy, index) => ({ proxy, index })))(
  "$proxy.name in front of an app, asking edgelimit rls",
  ({ proxy, index }) => {
    let url: string;
    beforeAll(async () => {
      url = await proxy.start(rls.httpPort);
    }, 30_000);

    it("gives anonymous /api/export 200, 200, 200, then 429 with Retry-After", async () => {
      const client = `203.0.113.${10 + index}`;
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
