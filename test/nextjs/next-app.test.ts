/**
 * examples/nextjs/middleware.ts in a real Next.js 15 app: the packed edgelimit installed by
 * name, the tsconfig an older create-next-app wrote (`moduleResolution: node`, which `next
 * build` typechecks with, TypeScript 5), `next build`, then `next start` processes on loopback
 * ports. Behind a proxy (EDGELIMIT_CLIENT_IP_HEADER), two processes count one client across
 * both in one real redis-server, through the REST bridge as Upstash would serve it; exposed
 * directly, a forged `x-real-ip` buys a client nothing.
 *
 * The example's limits count here per hour, not per minute (see writeApp): the same limits and
 * answers, with a fresh Redis and client addresses of their own.
 *
 * The slowest file of the suite: `next build` takes 30-60 s on this 2-core machine, each
 * `next start` 1-3 s (docs/redis.md#redis-over-http, "what the Next.js test costs").
 */
import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { closedPort } from "../gateway/helpers.js";
import { install, pack, ROOT } from "../package/packed.js";
import { startRedis } from "../redis/redis-server.js";
import { NEXT_COMPILER_OPTIONS } from "../support/nextjs.js";
import { type RedisRestBridge, startRedisRestBridge } from "../support/redis-rest-bridge.js";
import { HOUR_MS, withinOneWindow } from "../support/windows.js";

const work = mkdtempSync(join(tmpdir(), "edgelimit-next-"));
const app = join(work, "app");
const NEXT = join(ROOT, "node_modules", "next", "dist", "bin", "next");
const NEXT_ENV = { NEXT_TELEMETRY_DISABLED: "1", NODE_ENV: "production" };

let bridge: RedisRestBridge;
let stopRedis: () => Promise<void>;
let build: { status: number | null; output: string; seconds: number };
const processes: ChildProcess[] = [];

/**
 * The example's middleware with its windows an hour: a test needs some 15 s in one window (eight
 * requests through `next start` on a busy machine), which only an hour's last 15 s do not leave,
 * where a minute's last 15 s are a quarter of every minute.
 */
function middlewareWithHourWindows(): string {
  const source = readFileSync(join(ROOT, "examples", "nextjs", "middleware.ts"), "utf8");
  const tiers = "    tiers: {";
  if (!source.includes(tiers)) throw new Error(`the example's policy no longer says ${tiers}`);
  return source.replace(tiers, `    defaults: { window: "1h" },\n${tiers}`);
}

/** The app: the example's middleware, one API route, and what `npm install` would have put. */
function writeApp(): void {
  mkdirSync(join(app, "app", "api", "login"), { recursive: true });
  mkdirSync(join(app, "app", "api", "items"), { recursive: true });
  writeFileSync(join(app, "middleware.ts"), middlewareWithHourWindows());
  const route = `export const dynamic = "force-dynamic";
export function GET(): Response {
  return Response.json({ ok: true });
}
export const POST = GET;
`;
  writeFileSync(join(app, "app", "api", "login", "route.ts"), route);
  writeFileSync(join(app, "app", "api", "items", "route.ts"), route);
  writeFileSync(
    join(app, "package.json"),
    JSON.stringify({ name: "next-app", private: true, scripts: { build: "next build" } }),
  );
  writeFileSync(join(app, "next.config.mjs"), "export default {};\n");
  writeFileSync(
    join(app, "tsconfig.json"),
    JSON.stringify({
      compilerOptions: {
        ...NEXT_COMPILER_OPTIONS,
        module: "esnext",
        moduleResolution: "node",
        incremental: true,
        plugins: [{ name: "next" }],
      },
      include: ["next-env.d.ts", "**/*.ts", "**/*.tsx", ".next/types/**/*.ts"],
      exclude: ["node_modules"],
    }),
  );
  const { tarball } = pack(work);
  install(tarball, app, ["@types/node", "@types/react", "next", "react", "react-dom"]);
  // TypeScript 5: `next build` typechecks through TypeScript's JavaScript API, which 7 has not.
  symlinkSync(join(ROOT, "node_modules", "typescript5"), join(app, "node_modules", "typescript"));
}

beforeAll(async () => {
  const { server, cleanup } = await startRedis();
  stopRedis = cleanup;
  bridge = await startRedisRestBridge(server.url);
  writeApp();
  const started = performance.now();
  const result = spawnSync(process.execPath, [NEXT, "build"], {
    cwd: app,
    env: { ...process.env, ...NEXT_ENV },
    encoding: "utf8",
    timeout: 240_000,
  });
  build = {
    status: result.status,
    output: `${result.stdout}${result.stderr}`,
    seconds: (performance.now() - started) / 1000,
  };
}, 300_000);

afterAll(async () => {
  for (const child of processes) if (child.exitCode === null) child.kill("SIGKILL");
  await bridge?.close();
  await stopRedis?.();
  rmSync(work, { recursive: true, force: true });
});

/** `next start` on a free loopback port, with `env` on top of the machine's; its output kept. */
async function nextStart(env: Record<string, string>) {
  const port = await closedPort();
  const child = spawn(process.execPath, [NEXT, "start", "-p", String(port), "-H", "127.0.0.1"], {
    cwd: app,
    env: { ...process.env, ...NEXT_ENV, ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  processes.push(child);
  let output = "";
  child.stdout?.on("data", (chunk: Buffer) => {
    output += chunk.toString("utf8");
  });
  child.stderr?.on("data", (chunk: Buffer) => {
    output += chunk.toString("utf8");
  });
  const base = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 30_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`next start exited:\n${output}`);
    if (Date.now() > deadline) throw new Error(`next start did not answer:\n${output}`);
    const ready = await fetch(`${base}/`).then(
      (response) => response.arrayBuffer().then(() => true),
      () => false,
    );
    if (ready) break;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return { base, output: () => output };
}

async function login(base: string, headers: Record<string, string>): Promise<number> {
  const response = await fetch(`${base}/api/login`, { method: "POST", headers });
  await response.arrayBuffer();
  return response.status;
}

describe("the Next.js example in a real Next.js 15 app (next build, next start)", () => {
  it("builds: its tsconfig says moduleResolution node, and the Edge Runtime is not warned about", () => {
    expect(build.output, build.output).not.toMatch(/Failed to compile|Type error/);
    expect(build.status, build.output).toBe(0);
    expect(build.output).toContain("Middleware");
    expect(build.output).not.toMatch(/not supported in the Edge Runtime|CompressionStream/);
  });

  it("behind a proxy, counts one client across two next start processes in one Redis", async () => {
    const env = {
      EDGELIMIT_CLIENT_IP_HEADER: "x-real-ip",
      UPSTASH_REDIS_REST_URL: bridge.url,
      UPSTASH_REDIS_REST_TOKEN: bridge.token,
    };
    const [first, second] = await Promise.all([nextStart(env), nextStart(env)]);
    if (first === undefined || second === undefined) throw new Error("no next start");
    await withinOneWindow(HOUR_MS, 15_000);
    const before = bridge.requests["/"] ?? 0;
    const statuses: number[] = [];
    for (let i = 0; i < 8; i++) {
      statuses.push(
        await login((i % 2 === 0 ? first : second).base, { "x-real-ip": "203.0.113.50" }),
      );
    }
    // /api/login allows 5 a window per client, whichever process answers.
    expect(statuses).toEqual([200, 200, 200, 200, 200, 429, 429, 429]);
    expect((bridge.requests["/"] ?? 0) - before).toBeGreaterThanOrEqual(6);
    expect(await login(second.base, { "x-real-ip": "203.0.113.51" })).toBe(200);
    // The client gets the rate-limit headers on the route's response.
    const items = await fetch(`${first.base}/api/items`, {
      headers: { "x-real-ip": "203.0.113.52" },
    });
    expect(items.headers.get("x-ratelimit-limit")).toBe("30");
    await items.arrayBuffer();
    // A request that did not come through the proxy is refused, not counted as anyone.
    const bypass = await fetch(`${first.base}/api/items`);
    expect(bypass.status).toBe(400);
    expect(await bypass.json()).toMatchObject({ error: "client_address_missing" });
  }, 120_000);

  it("exposed directly, a forged x-real-ip buys nothing: 8 addresses, 5 admitted, and a warning", async () => {
    const direct = await nextStart({
      UPSTASH_REDIS_REST_URL: bridge.url,
      UPSTASH_REDIS_REST_TOKEN: bridge.token,
    });
    await withinOneWindow(HOUR_MS, 15_000);
    const statuses: number[] = [];
    for (let i = 0; i < 8; i++) {
      statuses.push(await login(direct.base, { "x-real-ip": `198.51.100.${i + 1}` }));
    }
    expect(statuses).toEqual([200, 200, 200, 200, 200, 429, 429, 429]);
    expect(direct.output()).toContain(
      "edgelimit middleware: no trusted client address, so 1 request(s) counted as one client",
    );
    expect(direct.output()).toContain(
      "set EDGELIMIT_CLIENT_IP_HEADER to the header your proxy sets",
    );
  }, 120_000);
});
