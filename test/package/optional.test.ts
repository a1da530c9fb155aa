/**
 * What only one edition needs is not installed for everyone: esbuild (build), ioredis (the
 * Redis store), pino, undici and uplot (the gateway, the rate limit service, replay's HTML
 * charts) are optional peers; the rate limit service's gRPC is node:http2's.
 * Installed without them, the core, the memory store and the fetch, node, lambda-edge,
 * cloudflare, dynamodb and dynamodb-fetch entries work, and each command that needs one names it.
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { withinOneWindow } from "../support/windows.js";
import { install, pack, ROOT } from "./packed.js";

let work: string;
let project: string;

beforeAll(() => {
  work = mkdtempSync(join(tmpdir(), "edgelimit-lean-"));
  project = join(work, "project");
  const { tarball } = pack(work);
  install(tarball, project, [], { optionalPeers: false });
  writeFileSync(join(project, "package.json"), '{ "name": "lean", "type": "module" }\n');
}, 60_000);

afterAll(() => {
  if (work !== undefined) rmSync(work, { recursive: true, force: true });
});

const node = (args: string[]) =>
  spawnSync(process.execPath, args, { cwd: project, encoding: "utf8", timeout: 30_000 });
const cli = (...args: string[]) => node(["node_modules/edgelimit/dist/cli/main.js", ...args]);

describe("an install without the optional peers", () => {
  it("declares them as optional peers, not dependencies", () => {
    const manifest = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as {
      dependencies: Record<string, string>;
      peerDependenciesMeta: Record<string, { optional: boolean }>;
    };
    for (const name of ["esbuild", "ioredis", "pino", "undici", "uplot"]) {
      expect(manifest.dependencies[name]).toBeUndefined();
      expect(manifest.peerDependenciesMeta[name]?.optional).toBe(true);
    }
  });

  it("limits with the memory store, and loads the entries that need none of them", async () => {
    const script = `
      import { createLimiter, definePolicy, memoryStore } from "edgelimit";
      await import("edgelimit/fetch"); await import("edgelimit/node");
      await import("edgelimit/lambda-edge"); await import("edgelimit/cloudflare");
      await import("edgelimit/dynamodb"); await import("edgelimit/dynamodb-fetch");
      const limiter = createLimiter({
        policy: definePolicy({ version: 1, tiers: { anonymous: { global: 1 } } }),
        store: memoryStore(),
      });
      const first = await limiter.check({ ip: "192.0.2.1", path: "/" });
      const second = await limiter.check({ ip: "192.0.2.1", path: "/" });
      console.log(first.action, second.action);`;
    // `global: 1` a minute on the real clock: the child's start and two decisions in one minute.
    await withinOneWindow(60_000, 5_000);
    const result = node(["--input-type=module", "-e", script]);
    expect(result.stderr).toBe("");
    expect(result.stdout.trim()).toBe("allow block");
  });

  it("checks policies, and names the package serve, rls, build and --store redis need", () => {
    writeFileSync(
      join(project, "policy.yaml"),
      "version: 1\ntiers: { anonymous: { global: 5 } }\n",
    );
    expect(cli("check", "policy.yaml").status).toBe(0);

    const serve = cli("serve", "--policy", "policy.yaml", "--demo");
    expect(serve.status).toBe(1);
    expect(serve.stderr).toMatch(/edgelimit serve needs the package (pino|undici|uplot)/);
    expect(serve.stderr).toContain("npm install pino undici uplot");

    const rls = cli("rls", "--policy", "policy.yaml");
    expect(rls.status).toBe(1);
    // Its gRPC listener is node:http2: rls needs no gRPC package.
    expect(rls.stderr).toContain("npm install pino uplot");

    const build = cli(
      "build",
      "lambda-edge",
      "--policy",
      "policy.yaml",
      "--store",
      "dynamodb://rate-limits?region=us-east-1",
      "--out",
      join(work, "out"),
    );
    expect(build.status).not.toBe(0);
    expect(build.stderr).toContain("needs esbuild");

    const redis = node([
      "--input-type=module",
      "-e",
      'import("edgelimit/redis").catch((e) => { console.error(e.code, e.message); process.exit(3); })',
    ]);
    expect(redis.status).toBe(3);
    expect(redis.stderr).toContain("ioredis");
  });
});
