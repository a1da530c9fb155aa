import { describe, expect, it } from "vitest";
import { EdgelimitError } from "../../src/core/errors.js";
import { definePolicy } from "../../src/policy/load.js";
import { neededSecrets, requireSecrets } from "../../src/policy/secrets.js";

const jwt = (
  algorithm: "HS256" | "RS256",
  key: { secret: { env: string } | { file: string } } | { publicKey: { env: string } },
) => ({ user: { jwt: { algorithms: [algorithm], ...key } } });
const challenging = {
  global: { limit: 10, action: "challenge", challengeBand: 2 },
} as const;

function thrown(run: () => void): EdgelimitError {
  try {
    run();
  } catch (error) {
    if (error instanceof EdgelimitError) return error;
    throw error;
  }
  throw new Error("nothing was thrown");
}

describe("requireSecrets", () => {
  it("names every unset variable at once, one issue per field", () => {
    const policy = definePolicy({
      version: 1,
      identity: jwt("HS256", { secret: { env: "A_JWT" } }),
      tiers: { anonymous: challenging },
      challenge: { secret: { env: "A_CHALLENGE" }, previousSecret: { env: "A_PREVIOUS" } },
    });
    const error = thrown(() => requireSecrets(policy, { env: { A_CHALLENGE: "" } }));
    expect(error.code).toBe("EL_POLICY_SECRET_MISSING");
    expect(error.issues.map((issue) => issue.path)).toEqual([
      "identity.user.jwt.secret",
      "challenge.secret",
      "challenge.previousSecret",
    ]);
    expect(error.message.split("\n")[0]).toBe(
      "3 secrets the policy reads are missing (identity.user.jwt.secret, challenge.secret, challenge.previousSecret); for example export A_JWT=... A_CHALLENGE=... A_PREVIOUS=...",
    );
  });

  it("passes when every needed variable is set", () => {
    const policy = definePolicy({
      version: 1,
      identity: jwt("HS256", { secret: { env: "B_JWT" } }),
      tiers: { anonymous: challenging },
      challenge: { secret: { env: "B_CHALLENGE" } },
    });
    expect(() => requireSecrets(policy, { env: { B_JWT: "x", B_CHALLENGE: "y" } })).not.toThrow();
  });

  it("asks nothing of the challenge's keys when no rule challenges", () => {
    const policy = definePolicy({
      version: 1,
      tiers: { anonymous: { global: 10 } },
      challenge: { secret: { env: "C_CHALLENGE" } },
    });
    expect(neededSecrets(policy)).toEqual([]);
    expect(() => requireSecrets(policy, { env: {} })).not.toThrow();
  });

  it("asks for the public key, not a secret, of asymmetric tokens", () => {
    const policy = definePolicy({
      version: 1,
      identity: jwt("RS256", { publicKey: { env: "D_KEY" } }),
      tiers: { anonymous: { global: 10 } },
    });
    expect(neededSecrets(policy).map((secret) => secret.path)).toEqual([
      "identity.user.jwt.publicKey",
    ]);
  });

  it("names a secret file that cannot be read, with why", () => {
    const policy = definePolicy({
      version: 1,
      identity: jwt("HS256", { secret: { file: "/nowhere/jwt.key" } }),
      tiers: { anonymous: { global: 10 } },
    });
    const error = thrown(() =>
      requireSecrets(policy, {
        env: {},
        readFile: () => {
          throw new Error("ENOENT: no such file or directory");
        },
      }),
    );
    expect(error.issues).toEqual([
      {
        path: "identity.user.jwt.secret",
        code: "EL_POLICY_SECRET_MISSING",
        message: "cannot read the file /nowhere/jwt.key: ENOENT: no such file or directory",
      },
    ]);
  });
});
