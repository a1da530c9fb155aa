/**
 * The guard itself, with the limiter it runs in every adapter: what it answers, and when it
 * answers without a promise (the gateway forwards such requests with no microtask turn). Its
 * behaviour through each runtime is the guard table (test/adapters/guard-table.test.ts).
 */
import { describe, expect, it } from "vitest";
import { Guard, type GuardOptions, type GuardTranslation } from "../../src/http/guard.js";
import type { Verdict } from "../../src/http/respond.js";
import { createLimiter } from "../../src/limiter.js";
import { definePolicy } from "../../src/policy/load.js";
import { memoryStore } from "../../src/stores/memory.js";
import { withinOneWindow } from "../support/windows.js";

interface Incoming {
  readonly path: string;
  readonly ip?: string;
}

type OnRefused = (request: Incoming, verdict: Verdict) => string | Promise<string>;

const translation: GuardTranslation<Incoming, undefined, OnRefused, string> = {
  describe: (request) => ({ ...request }),
  webRequest: (request) => new Request(`http://localhost${request.path}`),
  refused: (onRefused, request, _context, verdict) => onRefused(request, verdict),
};

function guardOf(options: GuardOptions<[request: Incoming], OnRefused> = {}, global = 2) {
  const limiter = createLimiter({
    policy: definePolicy({ tiers: { anonymous: { global } } }),
    store: memoryStore(),
  });
  return new Guard("test", limiter, options, translation);
}

describe("the guard", () => {
  it("answers without a promise when the limiter and the options do", () => {
    const guard = guardOf({ skip: (request) => request.path === "/health", cost: () => 1 });
    const first = guard.run({ path: "/", ip: "192.0.2.1" }, undefined);
    expect(first).not.toBeInstanceOf(Promise);
    expect(first).toMatchObject({
      kind: "forward",
      remove: "x-ratelimit-remaining",
      set: { "x-ratelimit-remaining": "1" },
    });
    expect(guard.run({ path: "/health" }, undefined)).toEqual({
      kind: "forward",
      verdict: undefined,
      remove: "x-ratelimit-remaining",
      set: {},
      respond: {},
    });
  });

  it("waits for an asynchronous skip and onRefused", async () => {
    // A limit of 1 a minute on the real clock: the refusal below needs the same minute.
    await withinOneWindow(60_000, 2_000);
    const guard = guardOf(
      {
        skip: async (request) => request.path === "/health",
        onRefused: async (_request, verdict) => `refused by ${verdict.rule}`,
      },
      1,
    );
    const skipped = guard.run({ path: "/health" }, undefined);
    expect(skipped).toBeInstanceOf(Promise);
    expect((await skipped).kind).toBe("forward");
    expect((await guard.run({ path: "/", ip: "192.0.2.2" }, undefined)).kind).toBe("forward");
    expect(await guard.run({ path: "/", ip: "192.0.2.2" }, undefined)).toMatchObject({
      kind: "answered",
      answer: "refused by anonymous.global",
    });
  });

  it("refuses a cost that is not a whole number of units, naming the adapter", () => {
    const guard = guardOf({ cost: () => 0.5 });
    expect(() => guard.run({ path: "/", ip: "192.0.2.3" }, undefined)).toThrow(
      "test: cost() must be a whole number from 1 to 1000000000 (or undefined for the rules' own); got 0.5",
    );
  });

  it("refuses a user option the policy does not allow, when it is built", () => {
    expect(() => guardOf({ user: () => ({ id: "alice" }) })).toThrow(
      "test: the user option counts requests as the users your application verified, which the policy does not allow; set identity.user.application: true in the policy",
    );
  });
});
