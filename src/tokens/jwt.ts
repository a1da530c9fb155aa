/**
 * Bearer tokens verified with jose. The core only knows the `TokenVerifier` interface; this is
 * the implementation every edition gives it. jose itself is loaded by the first token
 * (`./jose.ts`), so a cold start that sees none never pays for it.
 */
import type { JWTPayload } from "jose";
import { EdgelimitError } from "../core/errors.js";
import { GenerationalCache } from "../core/generational-cache.js";
import { NOT_CACHED, type TokenVerifier, type VerifiedUser } from "../core/identify.js";
import type { JwtIdentity } from "../core/model.js";
import { readHeader } from "../core/request-headers.js";
import { resolveSecret, type SecretContext } from "../core/secrets.js";
import type { RequestDescription } from "../core/types.js";

/** Tokens per cache generation: at most twice this many verified tokens are remembered. */
const CACHED_TOKENS_PER_GENERATION = 8192;
const MAX_CACHED_TOKEN_LENGTH = 4096;

/**
 * Verifies bearer tokens with jose. A token that is forged, expired, signed with another
 * algorithm or missing its user claim yields no user: the request is then counted as anonymous
 * by IP, so a bad token never buys a fresh counter. Verified tokens are cached (bounded) until
 * their own expiry, so a busy user costs one signature check, not one per request.
 */
export class JwtVerifier implements TokenVerifier {
  readonly #config: JwtIdentity;
  /** The key, or how to make it on the first token (a cold start with no token never pays). */
  #key: Promise<CryptoKey | Uint8Array> | (() => Promise<CryptoKey | Uint8Array>);
  #jose: Promise<typeof import("./jose.js")> | undefined;
  readonly #cache = new GenerationalCache<{ user: VerifiedUser | undefined; until: number }>(
    CACHED_TOKENS_PER_GENERATION,
  );
  readonly #cookieName: string | undefined;

  constructor(config: JwtIdentity, context: SecretContext) {
    this.#config = config;
    this.#cookieName = config.from.startsWith("cookie:") ? config.from.slice(7) : undefined;
    const symmetric = config.algorithms.every((algorithm) => algorithm.startsWith("HS"));
    if (symmetric) {
      if (config.secret === undefined) {
        throw new EdgelimitError(
          "EL_POLICY_INVALID",
          "identity.user.jwt.secret is required for HS256/HS384/HS512",
        );
      }
      const secret = resolveSecret(config.secret, context, "identity.user.jwt.secret");
      this.#key = () => Promise.resolve(new TextEncoder().encode(secret));
    } else {
      if (config.publicKey === undefined) {
        throw new EdgelimitError(
          "EL_POLICY_INVALID",
          "identity.user.jwt.publicKey is required for RS256/ES256/EdDSA",
        );
      }
      const pem = resolveSecret(config.publicKey, context, "identity.user.jwt.publicKey");
      const algorithm = config.algorithms[0] as string;
      this.#key = () => this.#loadJose().then((jose) => jose.importSPKI(pem, algorithm));
    }
  }

  /** The token a request carries, if any. */
  token(request: RequestDescription): string | undefined {
    if (this.#cookieName !== undefined) {
      const cookies = readHeader(request.headers, "cookie", request.lowerCaseHeaders);
      if (cookies === undefined) return undefined;
      for (const part of cookies.split(";")) {
        const eq = part.indexOf("=");
        if (eq > 0 && part.slice(0, eq).trim() === this.#cookieName)
          return part.slice(eq + 1).trim();
      }
      return undefined;
    }
    const header = readHeader(request.headers, "authorization", request.lowerCaseHeaders);
    if (header === undefined || header.length < 8) return undefined;
    if (header.slice(0, 7).toLowerCase() !== "bearer ") return undefined;
    return header.slice(7).trim();
  }

  /**
   * The cached outcome for a token checked before (a user, or undefined for a bad token), or
   * `NOT_CACHED`: lets a returning client be identified without waiting for anything.
   */
  cached(token: string, nowMs: number): VerifiedUser | undefined | typeof NOT_CACHED {
    const cached = this.#cache.get(token);
    return cached !== undefined && cached.until > nowMs ? cached.user : NOT_CACHED;
  }

  async verify(token: string, nowMs: number): Promise<VerifiedUser | undefined> {
    const cached = this.#cache.get(token);
    if (cached !== undefined && cached.until > nowMs) return cached.user;
    let user: VerifiedUser | undefined;
    let until = nowMs + 60_000;
    try {
      if (typeof this.#key === "function") this.#key = this.#key();
      const { jwtVerify } = await this.#loadJose();
      const { payload } = await jwtVerify(token, await this.#key, {
        algorithms: [...this.#config.algorithms],
        issuer: this.#config.issuer,
        audience: this.#config.audience,
        clockTolerance: this.#config.clockToleranceSeconds,
        currentDate: new Date(nowMs),
        // A token that never expires would be a permanent identity; refuse it.
        requiredClaims: ["exp"],
      });
      user = this.#userOf(payload);
      const expiresMs = ((payload.exp as number) + this.#config.clockToleranceSeconds) * 1000;
      until = Math.min(nowMs + 3_600_000, expiresMs);
    } catch {
      user = undefined;
    }
    if (token.length > MAX_CACHED_TOKEN_LENGTH) return user;
    this.#cache.set(token, { user, until });
    return user;
  }

  #loadJose(): Promise<typeof import("./jose.js")> {
    this.#jose ??= import("./jose.js").catch((error: unknown) => {
      // A chunk that could not be read is tried again by the next token.
      this.#jose = undefined;
      throw error;
    });
    return this.#jose;
  }

  #userOf(payload: JWTPayload): VerifiedUser | undefined {
    const id = payload[this.#config.userClaim];
    if (typeof id !== "string" && typeof id !== "number") return undefined;
    const idText = String(id);
    if (idText === "") return undefined;
    const planClaim = this.#config.planClaim;
    const plan = planClaim === undefined ? undefined : payload[planClaim];
    return { id: idText, plan: typeof plan === "string" && plan !== "" ? plan : undefined };
  }
}
