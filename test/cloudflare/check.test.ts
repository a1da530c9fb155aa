import { describe, expect, it } from "vitest";
import {
  bindingKey,
  checkCloudflarePolicy,
  createCloudflareHandler,
} from "../../src/adapters/cloudflare/index.js";
import { CloudflareStore } from "../../src/adapters/cloudflare/store.js";
import { EdgelimitError } from "../../src/core/errors.js";
import { counterKey, subjectKey } from "../../src/core/keys.js";
import { loadPolicy, parsePolicy } from "../../src/policy/load.js";

function policyWith(rule: string): ReturnType<typeof parsePolicy> {
  return parsePolicy(`
version: 1
identity: { ip: { source: header, header: cf-connecting-ip } }
namespaces:
  search:
    match: { path: /search }
    key: ip
${rule
  .trim()
  .split("\n")
  .map((line) => `    ${line}`)
  .join("\n")}
`);
}

describe("checkCloudflarePolicy", () => {
  it("accepts the workers.yaml example", () => {
    const policy = loadPolicy("examples/policies/workers.yaml");
    expect(checkCloudflarePolicy(policy)).toEqual([]);
    expect(checkCloudflarePolicy(policy, { login: "LIMIT_LOGIN", api: "LIMIT_API" })).toEqual([]);
  });

  it("refuses a binding period other than 10 or 60 seconds, naming the rule", () => {
    const issues = checkCloudflarePolicy(policyWith("limit: 5\nwindow: 30s\nbackend: approximate"));
    expect(issues).toHaveLength(1);
    expect(issues[0]?.code).toBe("EL_POLICY_BAD_WINDOW");
    expect(issues[0]?.path).toBe("rules.search.window");
    expect(issues[0]?.message).toContain('rule "search"');
    expect(issues[0]?.message).toContain("10 or 60 seconds only; got 30s");
    expect(
      checkCloudflarePolicy(policyWith("limit: 5\nwindow: 10s\nbackend: approximate")),
    ).toEqual([]);
    expect(
      checkCloudflarePolicy(policyWith("limit: 5\nwindow: 1mo\nbackend: approximate"))[0]?.message,
    ).toContain("got 1 month");
  });

  it("accepts any window on the exact backend, monthly included", () => {
    expect(checkCloudflarePolicy(policyWith("limit: 1000\nwindow: 1mo\nbackend: exact"))).toEqual(
      [],
    );
    expect(
      checkCloudflarePolicy(
        policyWith("limit: 9\nwindow: 45s\nalgorithm: token-bucket\nbackend: exact"),
      ),
    ).toEqual([]);
  });

  it("refuses other algorithms and challenges on the binding", () => {
    const algorithm = checkCloudflarePolicy(
      policyWith("limit: 5\nwindow: 60s\nalgorithm: sliding-window\nbackend: approximate"),
    );
    expect(algorithm.map((issue) => issue.path)).toEqual(["rules.search.algorithm"]);
    expect(algorithm[0]?.message).toContain("got algorithm sliding-window");
    const challenge = checkCloudflarePolicy(
      policyWith("limit: 5\nwindow: 60s\naction: challenge\nbackend: approximate"),
    );
    expect(challenge.map((issue) => issue.path)).toEqual(["rules.search.action"]);
  });

  it("refuses an approximate rule without a binding when the bindings are given", () => {
    const issues = checkCloudflarePolicy(
      policyWith("limit: 5\nwindow: 60s\nbackend: approximate"),
      {
        login: "LIMIT_LOGIN",
      },
    );
    expect(issues[0]?.message).toContain('no rate-limit binding for namespace "search"');
  });

  it("makes the handler factory throw with the same message", () => {
    const policy = policyWith("limit: 5\nwindow: 30s\nbackend: approximate");
    const [issue] = checkCloudflarePolicy(policy);
    let thrown: unknown;
    try {
      createCloudflareHandler({ policy, ratelimits: { search: "LIMIT_SEARCH" } });
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toBeInstanceOf(EdgelimitError);
    expect((thrown as EdgelimitError).code).toBe("EL_POLICY_INVALID");
    expect((thrown as EdgelimitError).message).toContain(issue?.message);
    expect((thrown as EdgelimitError).issues).toEqual([issue]);
  });
});

describe("callTimeoutMs", () => {
  const namespace = { idFromName: () => ({}), get: () => ({ fetch: async () => new Response() }) };

  it("refuses a call timeout that is not a positive number of milliseconds", () => {
    const policy = policyWith("limit: 5\nwindow: 30s\nbackend: exact");
    for (const callTimeoutMs of [0, -5, Number.NaN, Number.POSITIVE_INFINITY]) {
      expect(() => createCloudflareHandler({ policy, ratelimits: {}, callTimeoutMs })).toThrow(
        expect.objectContaining({
          code: "EL_BAD_OPTION",
          message: expect.stringContaining("callTimeoutMs must be a positive number"),
        }),
      );
      expect(
        () =>
          new CloudflareStore({
            env: { EDGELIMIT_COUNTER: namespace },
            ratelimits: {},
            counter: "EDGELIMIT_COUNTER",
            callTimeoutMs,
          }),
      ).toThrow(expect.objectContaining({ code: "EL_STORE_OPTION" }));
    }
    expect(() =>
      createCloudflareHandler({ policy, ratelimits: {}, callTimeoutMs: 2500 }),
    ).not.toThrow();
  });
});

describe("bindingKey", () => {
  it("is seed 003's operation:subject, short and built from the counted subject", () => {
    const subject = subjectKey("ip", "203.0.113.7");
    expect(
      bindingKey({ key: counterKey(subject, "login", "login"), subject, namespace: "login" }),
    ).toBe("login:ip:203.0.113.7");
    const user = subjectKey("user", "u|x:y");
    expect(
      bindingKey({ key: counterKey(user, "api", "rate"), subject: user, namespace: "api" }),
    ).toBe("api/rate:user:u%7Cx%3Ay");
  });
});
