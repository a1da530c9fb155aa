import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type Challenge,
  createChallenge,
  passFromCookies,
  solveProofOfWork,
} from "../../src/challenge/index.js";
import { createLimiter } from "../../src/limiter.js";
import { definePolicy } from "../../src/policy/load.js";
import type { PolicyInput } from "../../src/policy/schema.js";
import { MemoryStore } from "../../src/stores/memory.js";

const T0 = Date.UTC(2026, 0, 1, 12, 0, 0);
const ALICE = "ip:203.0.113.7";
const MALLORY = "ip:198.51.100.9";

function policy(challenge: PolicyInput["challenge"] = {}): PolicyInput {
  return {
    tiers: { anonymous: { global: { limit: 2, action: "challenge", challengeBand: 3 } } },
    challenge: {
      secret: { value: "current-secret" },
      difficulty: 8,
      cookie: { secure: false },
      ...challenge,
    },
  };
}

function challengeFor(input: PolicyInput, clock: () => number = () => T0): Challenge {
  const handler = createChallenge(definePolicy(input), { clock });
  if (handler === undefined) throw new Error("expected a challenge handler");
  return handler;
}

/** A limiter on the test policy that honours the challenge handler's passes, at T0. */
function limiterWithPasses() {
  const resolved = definePolicy(policy());
  const handler = createChallenge(resolved, { clock: () => T0 }) as Challenge;
  const limiter = createLimiter({
    policy: resolved,
    store: new MemoryStore(),
    clock: () => T0,
    passes: handler.passes,
  });
  return { handler, limiter };
}

function request(cookie: string | undefined) {
  return { path: "/", headers: cookie === undefined ? {} : { cookie } };
}

describe("passes", () => {
  it("verifies a pass for the subject it was issued to until it expires", async () => {
    const handler = challengeFor(policy());
    const token = await handler.passes.issue(ALICE, T0);
    expect(await handler.passes.verifyToken(token, ALICE, T0 + 29 * 60_000)).toBe(true);
    // Verified passes are cached: the cache must still honour the subject and the expiry.
    expect(await handler.passes.verifyToken(token, ALICE, T0 + 29 * 60_000)).toBe(true);
    expect(await handler.passes.verifyToken(token, MALLORY, T0 + 29 * 60_000)).toBe(false);
    expect(await handler.passes.verifyToken(token, ALICE, T0 + 30 * 60_000)).toBe(false);
  });

  it("refuses a pass rebound to another subject", async () => {
    const handler = challengeFor(policy());
    const token = await handler.passes.issue(ALICE, T0);
    expect(await handler.passes.verifyToken(token, MALLORY, T0)).toBe(false);
    expect(await handler.passes.verifyToken(token, "user:alice", T0)).toBe(false);
  });

  it("refuses forged passes: any edited byte, another secret, a stretched expiry", async () => {
    const handler = challengeFor(policy());
    const token = await handler.passes.issue(ALICE, T0);
    const [version, expires, mac] = token.split(".") as [string, string, string];
    const flipped = mac.slice(0, -1) + (mac.endsWith("A") ? "B" : "A");
    const middle = mac.slice(0, 10) + (mac[10] === "x" ? "y" : "x") + mac.slice(11);
    expect(await handler.passes.verifyToken(`${version}.${expires}.${middle}`, ALICE, T0)).toBe(
      false,
    );
    expect(await handler.passes.verifyToken(`${version}.${expires}.${flipped}`, ALICE, T0)).toBe(
      false,
    );
    const later = (Number.parseInt(expires, 36) + 3600).toString(36);
    expect(await handler.passes.verifyToken(`${version}.${later}.${mac}`, ALICE, T0)).toBe(false);
    expect(await handler.passes.verifyToken(`${version}.${expires}`, ALICE, T0)).toBe(false);
    expect(await handler.passes.verifyToken("", ALICE, T0)).toBe(false);
    const other = challengeFor(policy({ secret: { value: "attacker-secret" } }));
    const forged = await other.passes.issue(ALICE, T0);
    expect(await handler.passes.verifyToken(forged, ALICE, T0)).toBe(false);
  });

  it("refuses a pass issued under another policy", async () => {
    const handler = challengeFor(policy());
    const tighter = policy();
    tighter.tiers = { anonymous: { global: { limit: 1, action: "challenge", challengeBand: 3 } } };
    const token = await challengeFor(tighter).passes.issue(ALICE, T0);
    expect(await handler.passes.verifyToken(token, ALICE, T0)).toBe(false);
    const pinned = challengeFor(policy({ policyId: "prod-v1" }));
    const pinnedOther = challengeFor({
      ...tighter,
      challenge: { ...tighter.challenge, policyId: "prod-v1" },
    });
    expect(
      await pinned.passes.verifyToken(await pinnedOther.passes.issue(ALICE, T0), ALICE, T0),
    ).toBe(true);
  });

  it("accepts passes signed with the previous secret during a rotation, and only then", async () => {
    const old = challengeFor(policy({ secret: { value: "old-secret" } }));
    const token = await old.passes.issue(ALICE, T0);
    const rotating = challengeFor(
      policy({ secret: { value: "new-secret" }, previousSecret: { value: "old-secret" } }),
    );
    expect(await rotating.passes.verifyToken(token, ALICE, T0)).toBe(true);
    const fresh = await rotating.passes.issue(ALICE, T0);
    expect(await old.passes.verifyToken(fresh, ALICE, T0)).toBe(false);
    const rotated = challengeFor(policy({ secret: { value: "new-secret" } }));
    expect(await rotated.passes.verifyToken(token, ALICE, T0)).toBe(false);
    expect(await rotated.passes.verifyToken(fresh, ALICE, T0)).toBe(true);
  });

  it("reads secrets from the environment and names a missing one", () => {
    const input = policy({ secret: { env: "EDGELIMIT_PASS_SECRET" } });
    expect(
      createChallenge(definePolicy(input), { env: { EDGELIMIT_PASS_SECRET: "s" } }),
    ).toBeDefined();
    expect(() => createChallenge(definePolicy(input), { env: {} })).toThrow(
      /EDGELIMIT_PASS_SECRET/,
    );
  });

  it("is absent when no rule challenges", () => {
    expect(createChallenge(definePolicy({ tiers: { anonymous: { global: 5 } } }))).toBeUndefined();
  });

  it("sets an HttpOnly, SameSite=Lax, Path=/ cookie, Secure unless turned off", async () => {
    const secure = challengeFor(policy({ cookie: {} }));
    expect(secure.passes.cookie("t")).toBe(
      "edgelimit_pass=t; Max-Age=1800; Path=/; HttpOnly; SameSite=Lax; Secure",
    );
    expect(challengeFor(policy()).passes.cookie("t")).not.toContain("Secure");
  });

  it("spares the band but never the hard limit", async () => {
    const { handler, limiter } = limiterWithPasses();
    const cookie = `edgelimit_pass=${await handler.passes.issue("ip:203.0.113.7", T0)}`;
    const actions: string[] = [];
    for (let i = 0; i < 8; i++) {
      const verdict = await limiter.check({ ...request(cookie), ip: "203.0.113.7" });
      actions.push(verdict.action);
    }
    // limit 2, band 3: a pass holder gets 6, then a hard 429, never a challenge.
    expect(actions).toEqual([
      "allow",
      "allow",
      "allow",
      "allow",
      "allow",
      "allow",
      "block",
      "block",
    ]);
    const stranger = [];
    for (let i = 0; i < 3; i++) {
      stranger.push((await limiter.check({ ...request(cookie), ip: "198.51.100.9" })).action);
    }
    expect(stranger).toEqual(["allow", "allow", "challenge"]);
  });

  it("keeps the limiter synchronous on a challenging rule unless a MAC must be computed", async () => {
    const { handler, limiter } = limiterWithPasses();
    // No cookie, a malformed pass, an expired one: answered at once (the gateway's hot path).
    const expired = `edgelimit_pass=${await handler.passes.issue(ALICE, T0 - 31 * 60_000)}`;
    for (const cookie of [undefined, "edgelimit_pass=1.zz", expired, "other=1"]) {
      const verdict = limiter.decide({ ...request(cookie), ip: "203.0.113.7" });
      expect(verdict).not.toBeInstanceOf(Promise);
    }
    // A pass never seen needs its MAC checked once; then it is remembered and answered at once.
    const cookie = `edgelimit_pass=${await handler.passes.issue(ALICE, T0)}`;
    const first = limiter.decide({ ...request(cookie), ip: "203.0.113.7" });
    expect(first).toBeInstanceOf(Promise);
    expect((await first).action).toBe("allow");
    const again = limiter.decide({ ...request(cookie), ip: "203.0.113.7" });
    expect(again).not.toBeInstanceOf(Promise);
    // The remembered pass still counts against the band, for this subject only.
    expect(handler.passes.verify(request(cookie), ALICE, T0)).toBe(true);
    expect(await handler.passes.verify(request(cookie), MALLORY, T0)).toBe(false);
  });
});

describe("pass binding for IPv6 clients", () => {
  it("holds across one /64 and fails outside it", async () => {
    const { handler, limiter } = limiterWithPasses();
    const first = await limiter.check({ ip: "2001:db8:1:2::1", path: "/" });
    const cookie = `edgelimit_pass=${await handler.passes.issue(first.subject, T0)}`;
    const sameNetwork = [];
    for (let i = 0; i < 4; i++) {
      sameNetwork.push(
        (await limiter.check({ ip: "2001:db8:1:2::99", path: "/", headers: { cookie } })).action,
      );
    }
    // Counted as one /64: the first request above plus four here, all within the pass's 6.
    expect(sameNetwork).toEqual(["allow", "allow", "allow", "allow"]);
    const otherNetwork = [];
    for (let i = 0; i < 3; i++) {
      otherNetwork.push(
        (await limiter.check({ ip: "2001:db8:1:3::1", path: "/", headers: { cookie } })).action,
      );
    }
    expect(otherNetwork).toEqual(["allow", "allow", "challenge"]);
  });
});

describe("policy", () => {
  it("names a third-party provider's missing fields", () => {
    expect(() => definePolicy(policy({ provider: { kind: "turnstile" } }))).toThrow(
      /siteKey[\s\S]*secret/,
    );
  });

  it("resolves the seed's defaults", () => {
    const { challenge } = definePolicy({
      tiers: { anonymous: { global: { limit: 60, action: "challenge" } } },
    });
    expect(challenge).toMatchObject({
      path: "/captcha",
      passTtlMs: 1_800_000,
      challengeTtlMs: 120_000,
      difficulty: 16,
      cookie: { name: "edgelimit_pass", secure: true },
      provider: { kind: "pow" },
    });
  });
});

describe("proof of work", () => {
  const form = (fields: Record<string, string>) =>
    new Request("http://gateway.test/captcha/verify", {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams(fields),
    });

  async function pageChallenge(handler: Challenge, subject: string, redirect = "/reports?x=1") {
    const response = await handler.handle(
      new Request(`http://gateway.test/captcha?redirect=${encodeURIComponent(redirect)}`),
      { ip: "203.0.113.7", subject },
    );
    expect(response.status).toBe(200);
    expect(response.headers.get("cache-control")).toBe("no-store");
    const html = await response.text();
    const challenge = /name="challenge" value="([^"]+)"/.exec(html)?.[1];
    expect(challenge).toBeDefined();
    expect(html).toContain(`name="redirect" value="${redirect.replace("?", "?")}"`);
    return challenge as string;
  }

  it("grants a pass bound to the solver for a correct solution, once", async () => {
    const handler = challengeFor(policy());
    const challenge = await pageChallenge(handler, ALICE);
    const solution = await solveProofOfWork(challenge, 8);
    const response = await handler.handle(form({ challenge, solution, redirect: "/reports?x=1" }), {
      ip: "203.0.113.7",
      subject: ALICE,
    });
    expect(response.status).toBe(303);
    expect(response.headers.get("location")).toBe("/reports?x=1");
    const token = passFromCookies(
      response.headers.get("set-cookie") ?? undefined,
      "edgelimit_pass",
    );
    expect(await handler.passes.verifyToken(token as string, ALICE, T0)).toBe(true);
    expect(await handler.passes.verifyToken(token as string, MALLORY, T0)).toBe(false);

    const replay = await handler.handle(form({ challenge, solution, redirect: "/" }), {
      ip: "203.0.113.7",
      subject: ALICE,
    });
    expect(replay.status).toBe(403);
    expect(replay.headers.get("set-cookie")).toBeNull();
  });

  it("refuses a wrong nonce, a replay from another subject and an expired challenge", async () => {
    let now = T0;
    const handler = challengeFor(policy(), () => now);
    const challenge = await pageChallenge(handler, ALICE);
    const solution = await solveProofOfWork(challenge, 8);
    const wrong = await wrongSolution(challenge, 8);
    const check = (fields: Record<string, string>, subject: string) =>
      handler.handle(form(fields), { ip: undefined, subject }).then((response) => response.status);
    expect(await check({ challenge, solution: wrong }, ALICE)).toBe(403);
    expect(await check({ challenge, solution: "not-a-number" }, ALICE)).toBe(403);
    expect(await check({ challenge, solution }, MALLORY)).toBe(403);
    const tampered = challenge.replace(/\.8\./, ".1.");
    expect(
      await check({ challenge: tampered, solution: await solveProofOfWork(tampered, 1) }, ALICE),
    ).toBe(403);
    now = T0 + 2 * 60_000;
    expect(await check({ challenge, solution }, ALICE)).toBe(403);
    now = T0;
    expect(await check({ challenge, solution }, ALICE)).toBe(303);
  });

  it("refuses a body that is not a form", async () => {
    const handler = challengeFor(policy());
    const response = await handler.handle(
      new Request("http://gateway.test/captcha/verify", {
        method: "POST",
        body: "{}",
        headers: { "content-type": "application/json" },
      }),
      { ip: undefined, subject: ALICE },
    );
    expect(response.status).toBe(400);
  });

  it("serves a page with no third-party resource and a strict CSP", async () => {
    const handler = challengeFor(policy());
    const response = await handler.handle(new Request("http://gateway.test/captcha"), {
      ip: undefined,
      subject: ALICE,
    });
    const html = await response.text();
    expect(html).not.toMatch(/https?:\/\//);
    const csp = response.headers.get("content-security-policy") ?? "";
    expect(csp).toContain("default-src 'none'");
    expect(csp).toContain("form-action 'self'");
    const nonce = /script-src 'nonce-([^']+)'/.exec(csp)?.[1];
    expect(html).toContain(`<script nonce="${nonce}">`);
  });
});

async function wrongSolution(challenge: string, difficulty: number): Promise<string> {
  const { leadingZeroBits, sha256 } = await import("../../src/challenge/crypto.js");
  for (let counter = 0; ; counter++) {
    if (leadingZeroBits(await sha256(`${challenge}:${counter}`)) < difficulty)
      return String(counter);
  }
}

describe("siteverify providers", () => {
  let server: Server;
  let verifyUrl: string;
  const received: URLSearchParams[] = [];

  beforeAll(async () => {
    server = createServer((req, res) => {
      let body = "";
      req.on("data", (chunk) => {
        body += chunk;
      });
      req.on("end", () => {
        const form = new URLSearchParams(body);
        received.push(form);
        const success =
          form.get("secret") === "captcha-secret" && form.get("response") === "good-token";
        res.writeHead(200, { "content-type": "application/json" });
        res.end(
          JSON.stringify({ success, "error-codes": success ? [] : ["invalid-input-response"] }),
        );
      });
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    verifyUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/siteverify`;
  });

  afterAll(async () => {
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });

  for (const kind of ["turnstile", "hcaptcha"] as const) {
    it(`${kind}: grants a pass only when siteverify says success`, async () => {
      const field = kind === "turnstile" ? "cf-turnstile-response" : "h-captcha-response";
      const handler = challengeFor(
        policy({
          provider: { kind, siteKey: "site-key", secret: { value: "captcha-secret" }, verifyUrl },
        }),
      );
      const page = await handler.handle(new Request("http://gateway.test/captcha?redirect=/a"), {
        ip: "203.0.113.7",
        subject: ALICE,
      });
      const html = await page.text();
      expect(html).toContain('data-sitekey="site-key"');
      const submit = (token: string) =>
        handler.handle(
          new Request("http://gateway.test/captcha/verify", {
            method: "POST",
            headers: { "content-type": "application/x-www-form-urlencoded" },
            body: new URLSearchParams({ [field]: token, redirect: "/a" }),
          }),
          { ip: "203.0.113.7", subject: ALICE },
        );
      expect((await submit("bad-token")).status).toBe(403);
      const good = await submit("good-token");
      expect(good.status).toBe(303);
      expect(good.headers.get("set-cookie")).toMatch(/^edgelimit_pass=1\./);
      const last = received.at(-1) as URLSearchParams;
      expect(last.get("remoteip")).toBe("203.0.113.7");
    });
  }

  it("fails closed when siteverify is unreachable", async () => {
    const handler = challengeFor(
      policy({
        provider: {
          kind: "turnstile",
          siteKey: "k",
          secret: { value: "captcha-secret" },
          verifyUrl: "http://127.0.0.1:1/siteverify",
        },
      }),
    );
    const response = await handler.handle(
      new Request("http://gateway.test/captcha/verify", {
        method: "POST",
        headers: { "content-type": "application/x-www-form-urlencoded" },
        body: "cf-turnstile-response=good-token",
      }),
      { ip: undefined, subject: ALICE },
    );
    expect(response.status).toBe(403);
  });
});
