import { createHash } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type CloudFrontRequest,
  type CloudFrontRequestEvent,
  type CloudFrontResultResponse,
  createViewerRequestHandler,
  lazyChallenge,
} from "../../src/adapters/lambda-edge/index.js";
import { leadingZeroBits } from "../../src/challenge/crypto.js";
import { createChallenge, solveProofOfWork } from "../../src/challenge/index.js";
import { definePolicy, loadPolicy } from "../../src/policy/load.js";
import type { ResolvedPolicy } from "../../src/policy/types.js";
import { DynamoDbStore } from "../../src/stores/dynamodb.js";
import {
  createRateLimitTable,
  type LocalDynamo,
  startDynalite,
  TEST_CREDENTIALS,
} from "../dynamodb/harness.js";

const T0 = Date.UTC(2026, 1, 14, 14, 30, 5);

/** An answer that certainly misses 4 bits of proof of work (any fixed guess passes 1 time in 16). */
function wrongSolution(challenge: string): string {
  for (let counter = 0; ; counter++) {
    const digest = createHash("sha256").update(`${challenge}:${counter}`).digest();
    if ((digest[0] as number) >> 4 !== 0) return String(counter);
  }
}
/**
 * A solution found as `solveProofOfWork` finds it (the page's formula), hashing with node:crypto:
 * the example policy's difficulty 16 takes ~65,000 hashes on average and a long tail, which the
 * awaited WebCrypto digest made seconds (once past the test's 30 s on a busy machine).
 */
function solvedHere(challenge: string, difficulty: number): string {
  for (let counter = 0; ; counter++) {
    const digest = createHash("sha256").update(`${challenge}:${counter}`).digest();
    if (leadingZeroBits(digest) >= difficulty) return String(counter);
  }
}
const policy = definePolicy({
  version: 1,
  budget: "5s",
  tiers: { anonymous: { global: { limit: 2, action: "challenge", challengeBand: 3 } } },
  challenge: {
    path: "/captcha",
    secret: { value: "edge-challenge-secret-0123456789" },
    difficulty: 4,
  },
});

function viewerRequest(
  uri: string,
  options: {
    method?: string;
    querystring?: string;
    cookie?: string;
    form?: string;
    clientIp?: string;
  } = {},
): CloudFrontRequestEvent {
  const headers: CloudFrontRequest["headers"] = {
    host: [{ key: "Host", value: "d111111abcdef8.cloudfront.net" }],
  };
  if (options.cookie !== undefined) headers.cookie = [{ key: "Cookie", value: options.cookie }];
  if (options.form !== undefined) {
    headers["content-type"] = [{ key: "Content-Type", value: "application/x-www-form-urlencoded" }];
  }
  const request: CloudFrontRequest = {
    clientIp: options.clientIp ?? "203.0.113.178",
    method: options.method ?? "GET",
    uri,
    querystring: options.querystring ?? "",
    headers,
  };
  if (options.form !== undefined) {
    // As CloudFront sends it with "include body" on the association.
    request.body = {
      inputTruncated: false,
      action: "read-only",
      encoding: "base64",
      data: Buffer.from(options.form).toString("base64"),
    };
  }
  return { Records: [{ cf: { config: { eventType: "viewer-request" }, request } }] };
}

let dynamo: LocalDynamo;
let store: DynamoDbStore;

beforeAll(async () => {
  dynamo = await startDynalite();
  await createRateLimitTable(dynamo.client, "rate-limits");
  store = new DynamoDbStore({
    region: "us-east-1",
    endpoint: dynamo.endpoint,
    credentials: TEST_CREDENTIALS,
  });
});

afterAll(async () => {
  await store?.close();
  await dynamo?.close();
});

describe("the challenge at the edge", () => {
  it("redirects to the page, serves it, grants a pass for a solution, and honours the pass", async () => {
    let built = 0;
    const challenge = lazyChallenge(policy, () => {
      built++;
      return createChallenge(policy, { clock: () => T0 });
    });
    const handler = createViewerRequestHandler({
      policy,
      store,
      challenge,
      clock: () => T0,
      metrics: false,
    });
    const status = async (event: CloudFrontRequestEvent) => {
      const result = await handler(event);
      return "clientIp" in result ? "forwarded" : (result as CloudFrontResultResponse).status;
    };
    expect([
      await status(viewerRequest("/reports")),
      await status(viewerRequest("/reports")),
    ]).toEqual(["forwarded", "forwarded"]);
    const redirected = (await handler(
      viewerRequest("/reports", { querystring: "x=1" }),
    )) as CloudFrontResultResponse;
    expect(redirected.status).toBe("302");
    const location = redirected.headers?.location?.[0]?.value as string;
    // Nothing so far needed the challenge: the cold start did not pay for building it.
    expect(built).toBe(0);
    expect(location).toBe("/captcha?redirect=%2Freports%3Fx%3D1");

    const page = (await handler(
      viewerRequest("/captcha", { querystring: location.split("?")[1] }),
    )) as CloudFrontResultResponse;
    expect(page.status).toBe("200");
    expect(page.headers?.["content-type"]?.[0]?.value).toMatch(/^text\/html/);
    const token = /name="challenge" value="([^"]+)"/.exec(page.body ?? "")?.[1] as string;
    expect(token).toBeDefined();

    const wrong = (await handler(
      viewerRequest("/captcha/verify", {
        method: "POST",
        form: `challenge=${encodeURIComponent(token)}&solution=${wrongSolution(token)}&redirect=%2Freports`,
      }),
    )) as CloudFrontResultResponse;
    expect(wrong.status).toBe("403");

    const solution = await solveProofOfWork(token, 4);
    const verified = (await handler(
      viewerRequest("/captcha/verify", {
        method: "POST",
        form: `challenge=${encodeURIComponent(token)}&solution=${solution}&redirect=${encodeURIComponent("/reports?x=1")}`,
      }),
    )) as CloudFrontResultResponse;
    expect(verified.status).toBe("303");
    expect(verified.headers?.location?.[0]?.value).toBe("/reports?x=1");
    const setCookie = verified.headers?.["set-cookie"]?.[0]?.value as string;
    expect(setCookie).toMatch(/^edgelimit_pass=/);
    const cookie = setCookie.split(";")[0] as string;

    // With the pass the band is lifted up to the hard limit (3x2 = 6), never beyond.
    const withPass: string[] = [];
    for (let i = 0; i < 4; i++) withPass.push(await status(viewerRequest("/reports", { cookie })));
    expect(withPass).toEqual(["forwarded", "forwarded", "forwarded", "429"]);
    expect(
      await status(viewerRequest("/reports", { cookie: "edgelimit_pass=1.forged.AAAA" })),
    ).toBe("429");
  });

  describe("two instances of the example policy's handler", () => {
    const env = {
      EDGELIMIT_JWT_SECRET: "edge-jwt-secret-0123456789",
      EDGELIMIT_CHALLENGE_SECRET: "edge-shared-challenge-secret-0123",
    };
    const example = { ...loadPolicy("examples/policies/cloudfront.yaml"), budgetMs: 5_000 };
    const instances: DynamoDbStore[] = [];

    /** One Lambda@Edge instance: its own store connection, limiter and challenge keys. */
    function instance(policy: ResolvedPolicy) {
      const ownStore = new DynamoDbStore({
        region: "us-east-1",
        endpoint: dynamo.endpoint,
        credentials: TEST_CREDENTIALS,
      });
      instances.push(ownStore);
      const handler = createViewerRequestHandler({
        policy,
        store: ownStore,
        env,
        challenge: lazyChallenge(policy, () => createChallenge(policy, { env, clock: () => T0 })),
        clock: () => T0,
        metrics: false,
      });
      return async (uri: string, options: Parameters<typeof viewerRequest>[1] = {}) => {
        const result = await handler(viewerRequest(uri, options));
        return "clientIp" in result
          ? { status: "forwarded" }
          : (result as CloudFrontResultResponse);
      };
    }

    afterAll(async () => {
      for (const ownStore of instances) await ownStore.close();
    });

    /** Takes the client past the anonymous limit of 60 on `first`, then solves the page it serves on `second`. */
    async function solveAcross(policy: ResolvedPolicy, clientIp: string) {
      const first = instance(policy);
      const second = instance(policy);
      for (let i = 0; i < 60; i++)
        expect((await first("/home", { clientIp })).status).toBe("forwarded");
      expect((await first("/home", { clientIp })).status).toBe("302");
      const page = await first("/captcha", { clientIp, querystring: "redirect=%2Fhome" });
      expect(page.status).toBe("200");
      const token = /name="challenge" value="([^"]+)"/.exec(page.body ?? "")?.[1] as string;
      const solution = solvedHere(token, policy.challenge.difficulty);
      const verified = await second("/captcha/verify", {
        clientIp,
        method: "POST",
        form: `challenge=${encodeURIComponent(token)}&solution=${solution}&redirect=%2Fhome`,
      });
      return { first, second, verified };
    }

    it("honour a challenge solved on the other, and each other's passes", async () => {
      expect(example.challenge.secret).toEqual({ env: "EDGELIMIT_CHALLENGE_SECRET" });
      const clientIp = "198.51.100.61";
      const { first, second, verified } = await solveAcross(example, clientIp);
      expect(verified.status).toBe("303");
      const setCookie = verified.headers?.["set-cookie"]?.[0]?.value ?? "";
      expect(setCookie).toMatch(/^edgelimit_pass=/);
      const cookie = setCookie.split(";")[0];
      // The pass from the second instance lifts the band on both (61st and 62nd request).
      expect((await first("/home", { clientIp, cookie })).status).toBe("forwarded");
      expect((await second("/home", { clientIp, cookie })).status).toBe("forwarded");
      expect((await first("/home", { clientIp })).status).toBe("302");
    });

    it("refuse each other's challenges (403) when each signs with a random key of its own", async () => {
      const unsigned = { ...example, challenge: { ...example.challenge, secret: undefined } };
      const { verified } = await solveAcross(unsigned, "198.51.100.62");
      expect(verified.status).toBe("403");
    });
  });
});
