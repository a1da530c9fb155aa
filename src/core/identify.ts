/**
 * Who a request is: its tier (anonymous or authenticated), plan and the subjects it is counted
 * as. Identity comes only from what is verified (a token the `TokenVerifier` accepts) or trusted
 * by configuration (an address from trusted proxies, a header a trusted layer sets).
 */
import { type ClientAddress, IpResolver } from "./client-address.js";
import { EdgelimitError } from "./errors.js";
import type { Address } from "./ip.js";
import { subjectKey } from "./keys.js";
import type { ResolvedPolicy, TrustedHeaderIdentity } from "./model.js";
import { readHeader } from "./request-headers.js";
import type { RequestDescription, Tier } from "./types.js";

export interface VerifiedUser {
  readonly id: string;
  readonly plan: string | undefined;
}

/** Marks a token that was never checked (as opposed to one that was checked and refused). */
export const NOT_CACHED: unique symbol = Symbol("not cached");

/**
 * Checks the tokens requests carry (JWTs with jose in `tokens/jwt.ts`). A token that fails to
 * verify yields no user, and the request is counted as anonymous.
 */
export interface TokenVerifier {
  /** The token a request carries, if any. */
  token(request: RequestDescription): string | undefined;
  /** The outcome for a token checked before, or `NOT_CACHED` when it must be verified. */
  cached(token: string, nowMs: number): VerifiedUser | undefined | typeof NOT_CACHED;
  verify(token: string, nowMs: number): Promise<VerifiedUser | undefined>;
}

export interface Identity {
  readonly tier: Tier;
  readonly plan: string | undefined;
  /** `ip:203.0.113.7` (or its IPv6 prefix); `ip:unknown` without a valid address. */
  readonly ipSubject: string;
  readonly userSubject: string | undefined;
  readonly address: Address | undefined;
}

/** The subject a request is reported as (and a challenge pass is bound to). */
export function primarySubject(identity: Identity): string {
  return identity.userSubject ?? identity.ipSubject;
}

/** Resolves identities for one policy. */
export class Identifier {
  readonly #policy: ResolvedPolicy;
  readonly #ip: IpResolver;
  readonly #tokens: TokenVerifier | undefined;
  readonly #plans: ReadonlySet<string>;

  constructor(policy: ResolvedPolicy, tokens: TokenVerifier | undefined) {
    this.#policy = policy;
    this.#ip = new IpResolver(policy.identity.ip);
    this.#tokens = tokens;
    this.#plans = new Set(policy.plans.names);
  }

  /** Synchronous unless a token must be verified for the first time. */
  identify(request: RequestDescription, now: number): Identity | Promise<Identity> {
    const client = this.#ip.resolve(request);
    const tokens = this.#tokens;
    if (tokens !== undefined) {
      const token = tokens.token(request);
      if (token !== undefined) {
        const known = tokens.cached(token, now);
        if (known === NOT_CACHED) {
          return tokens.verify(token, now).then((user) => this.#identityOf(request, client, user));
        }
        return this.#identityOf(request, client, known);
      }
    }
    return this.#identityOf(request, client, undefined);
  }

  #identityOf(
    request: RequestDescription,
    client: ClientAddress,
    verified: VerifiedUser | undefined,
  ): Identity {
    let user = verified;
    const trustedHeader = this.#policy.identity.trustedHeader;
    if (user === undefined && trustedHeader !== undefined) {
      user = userFromTrustedHeader(trustedHeader, request, client.peerTrusted);
    }
    if (user === undefined && this.#policy.identity.application === true) {
      user = applicationUser(request.user);
    }
    if (user === undefined) {
      return {
        tier: "anonymous",
        plan: undefined,
        ipSubject: client.subjectKey,
        userSubject: undefined,
        address: client.address,
      };
    }
    let plan = user.plan;
    if (plan !== undefined && !this.#plans.has(plan)) plan = this.#policy.plans.default;
    return {
      tier: "authenticated",
      plan,
      ipSubject: client.subjectKey,
      userSubject: subjectKey("user", user.id),
      address: client.address,
    };
  }
}

/**
 * The user an application verified itself (the middleware's `user` option). No user, or an id
 * that is `undefined`, `null` or empty, is a logged-out visitor: anonymous, counted by address
 * (never one shared `user:undefined` bucket). An id or plan that is not a string is a mistake in
 * the caller's code, refused with what to pass.
 */
export function applicationUser(
  given: RequestDescription["user"] | null,
): VerifiedUser | undefined {
  if (given === undefined || given === null) return undefined;
  const id: unknown = given.id;
  const plan: unknown = given.plan;
  if (id === undefined || id === null || id === "") return undefined;
  if (typeof id !== "string") {
    throw new EdgelimitError(
      "EL_BAD_USER",
      `an application user's id must be a string (pass String(id)); got ${typeof id} ${String(id)}`,
    );
  }
  if (plan !== undefined && plan !== null && typeof plan !== "string") {
    throw new EdgelimitError(
      "EL_BAD_USER",
      `an application user's plan must be a string or undefined; got ${typeof plan} ${String(plan)}`,
    );
  }
  return { id, plan: plan === null || plan === "" ? undefined : plan };
}

/** Reads a user from a header that a trusted layer sets, only where the policy allows it. */
export function userFromTrustedHeader(
  config: TrustedHeaderIdentity,
  request: RequestDescription,
  peerTrusted: boolean,
): VerifiedUser | undefined {
  if (config.from === "trusted-proxies" && !peerTrusted) return undefined;
  const id = readHeader(request.headers, config.user, request.lowerCaseHeaders)?.trim();
  if (id === undefined || id === "") return undefined;
  const plan =
    config.plan === undefined
      ? undefined
      : readHeader(request.headers, config.plan, request.lowerCaseHeaders)?.trim();
  return { id, plan: plan === "" ? undefined : plan };
}
