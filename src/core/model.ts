/**
 * The resolved policy: the model the decision engine runs on. `policy/` turns a YAML or JSON
 * file into it; nothing here knows about files, schemas or HTTP.
 */
import type { AlgorithmName, Tier, WindowSpec } from "./types.js";

/** The request header that carries the remaining count to the origin, unless a policy names another. */
export const DEFAULT_ORIGIN_HEADER = "x-ratelimit-remaining";

/**
 * A policy's `budget`, `connectBudget` and `unavailableRetryAfter` when it says none (written
 * as the policy file would, in policy/resolve.ts), for entries that take no policy.
 */
export const DEFAULT_BUDGET_MS = 50;
export const DEFAULT_CONNECT_BUDGET_MS = 1_000;
export const DEFAULT_UNAVAILABLE_RETRY_AFTER_SECONDS = 5;

/** Where a secret or key comes from. Values are read when the limiter starts, never logged. */
export type SecretSource =
  | { readonly env: string }
  | { readonly value: string }
  | { readonly file: string };

export interface IpIdentity {
  /**
   * `socket`: the peer address. `header`: a header the platform itself sets (Cloudflare's
   * `CF-Connecting-IP`). `x-forwarded-for`: walked right to left over `trustedProxies`.
   */
  readonly source: "socket" | "header" | "x-forwarded-for";
  readonly header: string | undefined;
  readonly trustedProxies: readonly string[];
  readonly ipv6Prefix: number;
}

export interface JwtIdentity {
  readonly algorithms: readonly ("HS256" | "HS384" | "HS512" | "RS256" | "ES256" | "EdDSA")[];
  /** HMAC secret (HS*). */
  readonly secret: SecretSource | undefined;
  /** PEM public key (SPKI) for RS256 / ES256 / EdDSA. */
  readonly publicKey: SecretSource | undefined;
  readonly issuer: string | undefined;
  readonly audience: string | undefined;
  readonly userClaim: string;
  readonly planClaim: string | undefined;
  /** `authorization` (Bearer token) or `cookie:<name>`. */
  readonly from: string;
  readonly clockToleranceSeconds: number;
}

export interface TrustedHeaderIdentity {
  readonly user: string;
  readonly plan: string | undefined;
  /**
   * `trusted-proxies`: honoured only when the peer is in `identity.ip.trustedProxies`.
   * `any`: the layer in front always overwrites the header (for example an auth function in
   * the same CloudFront behaviour); use only when that is true.
   */
  readonly from: "trusted-proxies" | "any";
}

export interface ResolvedRule {
  /** Stable id shown in headers, logs and metrics: `anonymous.global`, `login.burst`. */
  readonly id: string;
  readonly namespace: string;
  readonly scope: string;
  /** Of the matching rules in one group only the most specific applies. */
  readonly group: string;
  readonly tiers: readonly Tier[];
  readonly plans: readonly string[] | undefined;
  /** The path the rule counts, in canonical form (`normalizePath`): `/pr%C3%A9f` for `/préf`. */
  readonly pathPrefix: string | undefined;
  readonly methods: readonly string[] | undefined;
  readonly key: "ip" | "user" | "user-or-ip";
  readonly limit: number;
  readonly window: WindowSpec;
  readonly algorithm: AlgorithmName;
  readonly cost: number;
  readonly action: "block" | "challenge";
  /** Challenge while count < limit * band (the seed: under 2x); block beyond. */
  readonly challengeBand: number;
  readonly shadow: boolean;
  /**
   * When the store has failed: `local` counts the rule in this process against its limit (see
   * core/local-fallback.ts), `open` admits, `closed` answers 503.
   */
  readonly failMode: "local" | "open" | "closed";
  readonly disclose: boolean;
  /** Cloudflare: `approximate` runs on the native binding, `exact` on the Durable Object. */
  readonly backend: "approximate" | "exact" | undefined;
  /**
   * `exact`: every admitted request is counted in the store before it is answered. `hybrid`:
   * a busy subject's admissions are spent from capacity reserved in the store ahead of use
   * (core/hybrid-counting.ts); never more than the limit, far fewer store calls.
   */
  readonly counting: "exact" | "hybrid";
}

export interface ResolvedPolicy {
  readonly version: 1;
  readonly identity: {
    readonly ip: IpIdentity;
    readonly jwt: JwtIdentity | undefined;
    readonly trustedHeader: TrustedHeaderIdentity | undefined;
    /** Whether a user the application verified (`RequestDescription.user`) is believed. */
    readonly application?: boolean;
  };
  readonly rules: readonly ResolvedRule[];
  /**
   * How rules' paths match. `caseSensitive`: whether letter case tells two paths apart; when
   * undefined, as the framework an adapter serves routes (see `RequestDescription`), and where
   * none is known every casing counts. Rules' `pathPrefix`es are canonical (core/path.ts).
   */
  readonly paths: { readonly caseSensitive: boolean | undefined };
  readonly plans: { readonly names: readonly string[]; readonly default: string | undefined };
  readonly failClosedPaths: readonly string[];
  readonly allowlist: readonly string[];
  readonly denylist: readonly string[];
  readonly challenge: ResolvedChallenge;
  /** Allow and deny lists read from a source that is refreshed while the limiter runs. */
  readonly lists: readonly ResolvedList[];
  /** Store time a decision waits beyond the store's known round trip (see core/deadline.ts). */
  readonly budgetMs: number;
  /** How long a store may take to set up a connection for a call (a cold instance's handshake). */
  readonly connectBudgetMs: number;
  readonly unavailableRetryAfterSeconds: number;
  /** What an override (core/overrides.ts) may do: unset, any limit on any rule. */
  readonly overrides?: ResolvedOverrideBounds | undefined;
  readonly headers: {
    /** `X-RateLimit-Limit/Remaining/Reset`. */
    readonly legacy: boolean;
    /** IETF draft-11 `RateLimit` and `RateLimit-Policy`. */
    readonly draft: boolean;
    /** Request header that carries the remaining count to the origin. */
    readonly origin: string;
  };
}

/** A policy's `overrides`: the most an override's limit may be, and which rules it may change. */
export interface ResolvedOverrideBounds {
  readonly maxLimit: number | undefined;
  readonly rules: readonly string[] | undefined;
  /** How often every instance reads them: the propagation bound (`refresh`; unset: 5 s). */
  readonly refreshMs?: number | undefined;
}

/** How the challenge page is served and how its passes are signed (see docs/challenge.md). */
export interface ResolvedChallenge {
  readonly path: string;
  /** HMAC key for passes and challenges; a random per-process key when absent. */
  readonly secret: SecretSource | undefined;
  /** The key being rotated out: passes it signed stay valid until they expire. */
  readonly previousSecret: SecretSource | undefined;
  /** Binds passes to this policy; undefined means a hash of the resolved policy. */
  readonly policyId: string | undefined;
  readonly passTtlMs: number;
  readonly challengeTtlMs: number;
  /** Leading zero bits the proof-of-work hash must have. */
  readonly difficulty: number;
  readonly cookie: { readonly name: string; readonly secure: boolean };
  readonly provider:
    | { readonly kind: "pow" }
    | {
        readonly kind: "turnstile" | "hcaptcha";
        readonly siteKey: string;
        readonly secret: SecretSource;
        readonly verifyUrl: string;
      };
}

export type ResolvedListSource =
  | { readonly type: "file"; readonly path: string }
  | { readonly type: "http"; readonly url: string }
  | {
      readonly type: "s3";
      readonly bucket: string;
      readonly key: string;
      readonly region: string;
      readonly endpoint: string | undefined;
    }
  | {
      readonly type: "dynamodb";
      readonly table: string;
      readonly region: string;
      readonly key: Readonly<Record<string, string>>;
      readonly attribute: string;
      readonly endpoint: string | undefined;
    };

export interface ResolvedList {
  readonly name: string;
  readonly kind: "allow" | "deny";
  readonly refreshMs: number;
  readonly source: ResolvedListSource;
}
