import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { SignJWT } from "jose";
import { Miniflare } from "miniflare";
import { afterAll, beforeAll } from "vitest";
import { buildCloudflareWorker, EXAMPLE_ENTRY } from "../../scripts/build-cloudflare.js";
import type { ResolvedPolicy } from "../../src/policy/types.js";

export const JWT_SECRET = "test-secret-for-the-workers-example-0123456789";
export const ORIGIN = "https://example.test";

/** The bindings examples/cloudflare/wrangler.toml declares, as Miniflare spells them. */
export const RATELIMITS = {
  LIMIT_LOGIN: { namespace_id: "1001", simple: { limit: 5, period: 60 } },
  LIMIT_API: { namespace_id: "1002", simple: { limit: 100, period: 60 } },
} as const;

export interface Runtime {
  readonly miniflare: Miniflare;
  dispatch(path: string, init?: RequestInit & { ip?: string }): Promise<FetchedResponse>;
}

export interface FetchedResponse {
  readonly status: number;
  readonly headers: Headers;
  readonly body: string;
}

/** A scratch folder for the bundle and the Durable Object storage; removed by `cleanup`. */
export async function scratch(): Promise<{ dir: string; cleanup: () => Promise<void> }> {
  const dir = await mkdtemp(join(tmpdir(), "edgelimit-cf-"));
  return { dir, cleanup: () => rm(dir, { recursive: true, force: true }) };
}

/** Bundles the example Worker (or the same Worker with another policy) the way the build does. */
export async function buildWorker(
  dir: string,
  policy: ResolvedPolicy | string,
  entry = EXAMPLE_ENTRY,
) {
  const outfile = join(dir, "worker.js");
  await buildCloudflareWorker({ policy, entry, outfile });
  return outfile;
}

/** The real workerd runtime, with the native binding emulated and Durable Objects persisted. */
export async function startRuntime(
  scriptPath: string,
  persistDir: string,
  counterClass = "EdgelimitCounter",
): Promise<Runtime> {
  const miniflare = new Miniflare({
    modules: true,
    scriptPath,
    // Module names are relative to this root; the bundle lives in a scratch folder.
    modulesRoot: dirname(scriptPath),
    compatibilityDate: "2025-06-01",
    ratelimits: RATELIMITS,
    durableObjects: { EDGELIMIT_COUNTER: { className: counterClass, useSQLite: true } },
    durableObjectsPersist: persistDir,
    bindings: { EDGELIMIT_JWT_SECRET: JWT_SECRET },
  });
  await miniflare.ready;
  return {
    miniflare,
    async dispatch(path, init = {}) {
      const { ip, ...rest } = init;
      // Miniflare passes the request to workerd as sent: CF-Connecting-IP is what the test says,
      // as it is what Cloudflare's edge says in production.
      const headers: Record<string, string> = {};
      new Headers(rest.headers).forEach((value, name) => {
        headers[name] = value;
      });
      if (ip !== undefined) headers["cf-connecting-ip"] = ip;
      const response = await miniflare.dispatchFetch(ORIGIN + path, {
        method: rest.method ?? "GET",
        headers,
      });
      return {
        status: response.status,
        headers: response.headers as unknown as Headers,
        body: await response.text(),
      };
    },
  };
}

/**
 * A Worker bundled with `policy` (from `entry`, whose counter class is `counterClass`) and
 * running in workerd, started before the enclosing suite's tests in a scratch folder of its own,
 * and disposed of with the folder after them; the function returned gives it to a test.
 */
export function workerInSuite(
  policy: ResolvedPolicy | string,
  entry = EXAMPLE_ENTRY,
  counterClass = "EdgelimitCounter",
): () => Runtime {
  let runtime: Runtime | undefined;
  let cleanup = async () => {};
  beforeAll(async () => {
    const folder = await scratch();
    cleanup = folder.cleanup;
    const script = await buildWorker(folder.dir, policy, entry);
    runtime = await startRuntime(script, join(folder.dir, "objects"), counterClass);
  }, 60_000);
  afterAll(async () => {
    await runtime?.miniflare.dispose();
    await cleanup();
  });
  return () => {
    if (runtime === undefined) throw new Error("the suite's Worker did not start");
    return runtime;
  };
}

export async function tokenFor(userId: string, plan?: string): Promise<string> {
  const claims = plan === undefined ? {} : { plan };
  return new SignJWT(claims)
    .setProtectedHeader({ alg: "HS256" })
    .setSubject(userId)
    .setIssuedAt()
    .setExpirationTime("10m")
    .sign(new TextEncoder().encode(JWT_SECRET));
}

/**
 * The binding and the rules count in windows aligned to the epoch. A test that must see N
 * requests land in one window waits for a fresh one when too little of the current is left.
 */
export { withinOneWindow } from "../support/windows.js";

export function tally(statuses: readonly number[]): Record<number, number> {
  const counts: Record<number, number> = {};
  for (const status of statuses) counts[status] = (counts[status] ?? 0) + 1;
  return counts;
}
