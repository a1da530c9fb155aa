import { describe, expect, it } from "vitest";
import { ipSubject, parseIp } from "../../src/core/ip.js";
import { readHeader } from "../../src/core/request-headers.js";
import { createLimiter } from "../../src/limiter.js";
import { definePolicy } from "../../src/policy/load.js";
import type { PolicyInput } from "../../src/policy/schema.js";
import { memoryStore } from "../../src/stores/memory.js";
import { JWT_SECRET, signToken } from "../support/jwt.js";
import { withinOneWindow } from "../support/windows.js";

const env = { EDGELIMIT_JWT_SECRET: JWT_SECRET };
const jwt = {
  algorithms: ["HS256" as const],
  secret: { env: "EDGELIMIT_JWT_SECRET" },
  planClaim: "plan",
};

function limiter(input: PolicyInput) {
  return createLimiter({ policy: definePolicy(input), store: memoryStore(), env });
}

/** Sends `count` requests and returns how many were admitted. */
async function admitted(
  check: (i: number) => Promise<{ action: string }>,
  count: number,
): Promise<number> {
  let passed = 0;
  for (let i = 0; i < count; i++) if ((await check(i)).action === "allow") passed++;
  return passed;
}

describe("reading a header from a plain object", () => {
  it("finds a header whatever the case of its name on either side, and nothing else", () => {
    const headers = { "X-Forwarded-For": "198.51.100.1", "Cache-Control": "no-cache", host: "a" };
    expect(readHeader(headers, "x-forwarded-for")).toBe("198.51.100.1");
    expect(readHeader(headers, "X-Forwarded-For")).toBe("198.51.100.1");
    expect(readHeader({ "x-forwarded-for": "198.51.100.2" }, "X-Forwarded-For")).toBe(
      "198.51.100.2",
    );
    expect(readHeader({ AUTHORIZATION: "Bearer t" }, "authorization")).toBe("Bearer t");
    // Same length as "authorization", another name.
    expect(readHeader(headers, "authorization")).toBeUndefined();
    expect(readHeader({ "set-cookie": ["a=1", "b=2"] }, "set-cookie")).toBe("a=1, b=2");
  });

  it("trusts a promise of lower-case names (Node's) and still finds a name asked in capitals", () => {
    const node = { "x-user-id": "u_1", authorization: "Bearer t" };
    expect(readHeader(node, "x-user-id", true)).toBe("u_1");
    expect(readHeader(node, "X-User-Id", true)).toBe("u_1");
    expect(readHeader(node, "cookie", true)).toBeUndefined();
    // The promise is taken at its word: another spelling is not searched for.
    expect(readHeader({ Cookie: "a=1" }, "cookie", true)).toBeUndefined();
    expect(readHeader({ Cookie: "a=1" }, "cookie")).toBe("a=1");
  });
});

describe("client address", () => {
  const behindProxy = {
    identity: {
      ip: { source: "x-forwarded-for" as const, trustedProxies: ["127.0.0.0/8", "10.0.0.0/8"] },
    },
    tiers: { anonymous: { global: 5 } },
  };

  it("ignores X-Forwarded-For from an untrusted peer: forging it buys no fresh counter", async () => {
    // `global: 5` is a minute window on the real clock: the count must stay in one minute.
    await withinOneWindow(60_000, 2_000);
    const l = limiter(behindProxy);
    const passed = await admitted(
      (i) =>
        l.check({ ip: "203.0.113.50", path: "/", headers: { "x-forwarded-for": `198.18.0.${i}` } }),
      20,
    );
    expect(passed).toBe(5);
  });

  it("walks X-Forwarded-For right to left over trusted proxies only", async () => {
    // `global: 5` is a minute window on the real clock: the count must stay in one minute.
    await withinOneWindow(60_000, 2_000);
    const l = limiter(behindProxy);
    // The client wrote "1.1.1.1"; our proxies appended the real address and themselves.
    const verdict = await l.check({
      ip: "127.0.0.1",
      path: "/",
      headers: { "x-forwarded-for": "1.1.1.1, 203.0.113.60, 10.0.0.2" },
    });
    expect(verdict.subject).toBe("ip:203.0.113.60");
    const passed = await admitted(
      (i) =>
        l.check({
          ip: "127.0.0.1",
          path: "/",
          headers: { "x-forwarded-for": `198.18.0.${i}, 203.0.113.60` },
        }),
      20,
    );
    expect(passed).toBe(4);
  });

  it("reads odd X-Forwarded-For lists hop by hop: spaces, empty and malformed entries", async () => {
    const l = limiter(behindProxy);
    const subjectFor = async (forwarded: string) =>
      (await l.check({ ip: "127.0.0.1", path: "/", headers: { "x-forwarded-for": forwarded } }))
        .subject;
    expect(await subjectFor(" 203.0.113.62 ")).toBe("ip:203.0.113.62");
    expect(await subjectFor("198.18.0.1,,203.0.113.63, 10.0.0.2")).toBe("ip:203.0.113.63");
    // The rightmost entry is empty or malformed: nobody we trust wrote it; the peer is counted.
    expect(await subjectFor("203.0.113.61 ,")).toBe("ip:127.0.0.1");
    expect(await subjectFor("203.0.113.61, not-an-ip")).toBe("ip:127.0.0.1");
    // Malformed left of a trusted proxy: the proxy is the last address we can vouch for.
    expect(await subjectFor("not-an-ip, 10.0.0.2")).toBe("ip:10.0.0.2");
    // Only trusted proxies all the way: the leftmost of them.
    expect(await subjectFor("10.0.0.3,10.0.0.2")).toBe("ip:10.0.0.3");
  });

  it("resolves each request from its own peer when peers alternate", async () => {
    const l = limiter(behindProxy);
    const forwarded = { "x-forwarded-for": "203.0.113.70" };
    const subjects: string[] = [];
    for (const ip of ["127.0.0.1", "203.0.113.9", "127.0.0.1", "::ffff:127.0.0.1", "203.0.113.9"]) {
      subjects.push((await l.check({ ip, path: "/", headers: forwarded })).subject);
    }
    // Trusted peers pass the forwarded address on; the untrusted peer is counted itself.
    expect(subjects).toEqual([
      "ip:203.0.113.70",
      "ip:203.0.113.9",
      "ip:203.0.113.70",
      "ip:203.0.113.70",
      "ip:203.0.113.9",
    ]);
  });

  it("counts IPv6 clients per /64: rotating addresses inside it buys nothing", async () => {
    // `global: 5` is a minute window on the real clock: the count must stay in one minute.
    await withinOneWindow(60_000, 2_000);
    const l = limiter({ tiers: { anonymous: { global: 5 } } });
    const passed = await admitted(
      (i) => l.check({ ip: `2001:db8:1:2:${i.toString(16)}:abcd:0:${i}`, path: "/" }),
      50,
    );
    expect(passed).toBe(5);
    expect((await l.check({ ip: "2001:db8:1:3::1", path: "/" })).action).toBe("allow");
  });

  it("counts IPv4-mapped IPv6 as the IPv4 address", async () => {
    // `global: 2` is a minute window on the real clock: the count must stay in one minute.
    await withinOneWindow(60_000, 2_000);
    const l = limiter({ tiers: { anonymous: { global: 2 } } });
    await l.check({ ip: "::ffff:192.0.2.33", path: "/" });
    await l.check({ ip: "192.0.2.33", path: "/" });
    expect((await l.check({ ip: "::ffff:c000:221", path: "/" })).action).toBe("block");
  });

  it("parses the forms addresses take in sockets and headers", () => {
    expect(parseIp("[2001:db8::1]:443")?.toString()).toBe("2001:db8::1");
    expect(parseIp("198.51.100.1:8080")?.toString()).toBe("198.51.100.1");
    expect(parseIp("fe80::1%eth0")?.toString()).toBe("fe80::1");
    expect(parseIp("127.1")).toBeUndefined();
    expect(parseIp("not-an-ip")).toBeUndefined();
    const v6 = parseIp("2001:db8:aaaa:bbbb:cccc:dddd:eeee:ffff");
    expect(v6 && ipSubject(v6, 48)).toBe("2001:db8:aaaa::/48");
  });
});

describe("user identity", () => {
  const policy = {
    identity: { user: { jwt } },
    tiers: { anonymous: { global: 3 }, authenticated: { global: 100 } },
  };

  it("ignores a forged x-user-id header: only verified identities count", async () => {
    // `global: 3` is a minute window on the real clock: the count must stay in one minute.
    await withinOneWindow(60_000, 2_000);
    const l = limiter(policy);
    const passed = await admitted(
      (i) => l.check({ ip: "203.0.113.70", path: "/", headers: { "x-user-id": `u_${i}` } }),
      10,
    );
    expect(passed).toBe(3);
  });

  it("counts a token with a bad signature as anonymous, by IP", async () => {
    // `global: 3` is a minute window on the real clock: the count must stay in one minute.
    await withinOneWindow(60_000, 2_000);
    const l = limiter(policy);
    const passed = await admitted(
      async (i) =>
        l.check({
          ip: "203.0.113.71",
          path: "/",
          headers: {
            authorization: `Bearer ${await signToken({ sub: `u_${i}` }, { secret: "another-secret-another-secret-1234" })}`,
          },
        }),
      10,
    );
    expect(passed).toBe(3);
  });

  it("counts an expired token as anonymous, and refuses a token without expiry", async () => {
    const l = limiter(policy);
    const expired = await signToken(
      { sub: "u_old" },
      { expiresAt: Math.floor(Date.now() / 1000) - 600 },
    );
    const verdict = await l.check({
      ip: "203.0.113.72",
      path: "/",
      headers: { authorization: `Bearer ${expired}` },
    });
    expect(verdict.tier).toBe("anonymous");
    const { SignJWT } = await import("jose");
    const forever = await new SignJWT({ sub: "u_forever" })
      .setProtectedHeader({ alg: "HS256" })
      .sign(new TextEncoder().encode(JWT_SECRET));
    const noExpiry = await l.check({
      ip: "203.0.113.72",
      path: "/",
      headers: { authorization: `Bearer ${forever}` },
    });
    expect(noExpiry.tier).toBe("anonymous");
  });

  it("refuses alg=none and a token signed with an algorithm the policy does not allow", async () => {
    const l = limiter(policy);
    const header = Buffer.from(JSON.stringify({ alg: "none", typ: "JWT" })).toString("base64url");
    const body = Buffer.from(JSON.stringify({ sub: "u_admin", exp: 9999999999 })).toString(
      "base64url",
    );
    const verdict = await l.check({
      ip: "203.0.113.73",
      path: "/",
      headers: { authorization: `Bearer ${header}.${body}.` },
    });
    expect(verdict.tier).toBe("anonymous");
  });

  it("honours a trusted auth layer's header only from a trusted peer", async () => {
    const l = limiter({
      identity: { user: { trustedHeader: { user: "x-user-id", plan: "x-user-plan" } } },
      tiers: { anonymous: { global: 1 }, authenticated: { global: 50 } },
    });
    const fromProxy = await l.check({
      ip: "127.0.0.1",
      path: "/",
      headers: { "x-user-id": "u_1" },
    });
    expect(fromProxy.subject).toBe("user:u_1");
    const fromClient = await l.check({
      ip: "203.0.113.74",
      path: "/",
      headers: { "x-user-id": "u_1" },
    });
    expect(fromClient.subject).toBe("ip:203.0.113.74");
  });

  it("judges the peer on every request, whichever way the same address came before", async () => {
    // `global: 50` is a minute window on the real clock: the count must stay in one minute.
    await withinOneWindow(60_000, 2_000);
    // Both arrive as the same address, one cache entry in the resolver: the address a trusted
    // proxy named must not lend its trust to the same address connecting directly, nor the reverse.
    const l = limiter({
      identity: {
        ip: { source: "x-forwarded-for", trustedProxies: ["127.0.0.0/8"] },
        user: { trustedHeader: { user: "x-user-id" } },
      },
      tiers: { anonymous: { global: 50 }, authenticated: { global: 50 } },
    });
    const viaProxy = () =>
      l.check({
        ip: "127.0.0.1",
        path: "/",
        headers: { "x-forwarded-for": "203.0.113.80", "x-user-id": "u_2" },
      });
    const direct = () =>
      l.check({ ip: "203.0.113.80", path: "/", headers: { "x-user-id": "u_2" } });
    expect((await viaProxy()).subject).toBe("user:u_2");
    expect((await direct()).subject).toBe("ip:203.0.113.80");
    expect((await viaProxy()).subject).toBe("user:u_2");
    expect((await direct()).subject).toBe("ip:203.0.113.80");
    // The anonymous count of the address is one counter, whichever way it arrived.
    const anonymous = await l.check({ ip: "203.0.113.80", path: "/" });
    expect(anonymous.remaining).toBe(47);
  });
});
