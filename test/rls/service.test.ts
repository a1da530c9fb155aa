import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { MemoryStore } from "../../src/index.js";
import { definePolicy } from "../../src/policy/load.js";
import type { RlsAnswer } from "../../src/rls/answer.js";
import { loadRlsConfig } from "../../src/rls/config-files.js";
import { CODE, type RateLimitRequest } from "../../src/rls/messages.js";
import { RateLimitService } from "../../src/rls/service.js";

/**
 * The service in this process, on a clock the test drives: what depends on time (a window
 * rolling over) and on envoyproxy/ratelimit's process-wide switches (SHADOW_MODE and the limit
 * headers), which a gRPC test could only reach by waiting or by a process per switch.
 */

const dir = mkdtempSync(join(tmpdir(), "edgelimit-rls-service-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const file = join(dir, "config.yaml");
writeFileSync(
  file,
  [
    "domain: svc",
    "descriptors:",
    "  - key: client",
    "    rate_limit: { unit: minute, requests_per_unit: 2 }",
    "  - key: day",
    "    rate_limit: { unit: day, requests_per_unit: 5 }",
    "",
  ].join("\n"),
);

function service(options: { globalShadow?: boolean; limitHeaders?: boolean; now: { at: number } }) {
  const loaded = loadRlsConfig(file, {
    mergeDomains: false,
    globalShadow: options.globalShadow ?? false,
  });
  return new RateLimitService({
    store: new MemoryStore(),
    config: loaded.config,
    globalShadow: options.globalShadow,
    limitHeaders: options.limitHeaders
      ? { limit: "ratelimit-limit", remaining: "ratelimit-remaining", reset: "ratelimit-reset" }
      : undefined,
    clock: () => options.now.at,
  });
}

const call = (...descriptors: [string, string][]): RateLimitRequest => ({
  domain: "svc",
  hitsAddend: 0,
  descriptors: descriptors.map(([key, value]) => ({
    entries: [{ key, value }],
    limit: undefined,
    hitsAddend: undefined,
  })),
});

async function ask(rls: RateLimitService, request: RateLimitRequest): Promise<RlsAnswer> {
  return rls.shouldRateLimit(request, "127.0.0.1");
}

describe("the rate limit service on a driven clock", () => {
  it("counts in the unit's window, aligned to the epoch, and starts again in the next", async () => {
    const now = { at: Date.UTC(2030, 0, 1, 12, 0, 10) };
    const rls = service({ now });
    const codes = async () =>
      (await ask(rls, call(["client", "a"]))).response?.statuses.map((status) => [
        status.code,
        status.limitRemaining,
        status.durationUntilResetMs,
      ]);
    expect(await codes()).toEqual([[CODE.OK, 1, 50_000]]);
    expect(await codes()).toEqual([[CODE.OK, 0, 50_000]]);
    expect(await codes()).toEqual([[CODE.OVER_LIMIT, 0, 50_000]]);
    now.at += 50_000; // 12:01:00, the next minute
    expect(await codes()).toEqual([[CODE.OK, 1, 60_000]]);
  });

  it("with SHADOW_MODE, reports each descriptor over its limit and answers OK overall", async () => {
    const rls = service({ now: { at: Date.UTC(2030, 0, 1, 12, 0, 10) }, globalShadow: true });
    for (let i = 0; i < 2; i++) await ask(rls, call(["client", "s"]));
    const answer = await ask(rls, call(["client", "s"]));
    expect(answer.response?.overallCode).toBe(CODE.OK);
    expect(answer.response?.statuses.map((status) => status.code)).toEqual([CODE.OVER_LIMIT]);
    expect(answer.response?.responseHeadersToAdd).toEqual([]);
    expect(answer.record.action).toBe("allow");
  });

  it("with LIMIT_RESPONSE_HEADERS_ENABLED, adds the limit of the descriptor closest to it", async () => {
    const rls = service({ now: { at: Date.UTC(2030, 0, 1, 12, 0, 10) }, limitHeaders: true });
    const answer = await ask(rls, call(["client", "h"], ["day", "h"]));
    expect(answer.response?.responseHeadersToAdd).toEqual([
      { key: "ratelimit-limit", value: "2" },
      { key: "ratelimit-remaining", value: "1" },
      { key: "ratelimit-reset", value: "50" },
    ]);
    await ask(rls, call(["client", "h"], ["day", "h"]));
    const refused = await ask(rls, call(["client", "h"], ["day", "h"]));
    expect(refused.response?.responseHeadersToAdd).toEqual([
      { key: "retry-after", value: "50" },
      { key: "ratelimit-limit", value: "2" },
      { key: "ratelimit-remaining", value: "0" },
      { key: "ratelimit-reset", value: "50" },
    ]);
  });
});

describe("the service's overrides", () => {
  /** A memory store whose overrides source counts its version reads. */
  function counting(): { store: MemoryStore; reads: () => number } {
    const store = new MemoryStore();
    const source = store.overrides();
    let reads = 0;
    const version = source.version.bind(source);
    source.version = () => {
      reads++;
      return version();
    };
    return { store, reads: () => reads };
  }

  it("are read only once there is a policy: a configuration's descriptors take none", async () => {
    const { config } = loadRlsConfig(file, { mergeDomains: false, globalShadow: false });
    const configOnly = counting();
    const bare = new RateLimitService({ store: configOnly.store, config });
    const withPolicy = counting();
    const both = new RateLimitService({
      store: withPolicy.store,
      config,
      policy: definePolicy({ version: 1, tiers: { anonymous: { global: 10 } } }),
    });
    try {
      await new Promise((resolve) => setTimeout(resolve, 50));
      expect(configOnly.reads()).toBe(0);
      expect(withPolicy.reads()).toBe(1);
    } finally {
      bare.close();
      both.close();
    }
  });
});
