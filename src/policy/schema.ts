import { z } from "zod";
import {
  type DurationOptions,
  durationProblem,
  MAX_WAIT_MS,
  parseDurationMs,
} from "../core/duration.js";
import { isCidr } from "../core/ip.js";
import type { Budget, Duration, WindowDuration } from "./input-types.js";
import { pathKeyProblem } from "./path-key.js";

/**
 * The policy file's schema. Every object is strict: an unknown field is an error that names
 * the field and lists the allowed ones, because a misspelt `limt:` silently ignored is a limit
 * silently missing.
 */

/**
 * A duration field: which forms it accepts is per field and listed in docs/policy.md. Any string
 * or number reaches the check, to be refused with the spelling to use; `Input` is what
 * TypeScript callers may write (input-types.ts).
 */
function durationField<Input extends string | number>(options: DurationOptions = {}) {
  return z.union([z.number(), z.string()]).superRefine((value, ctx) => {
    const problem = durationProblem(value, options);
    if (problem !== undefined) ctx.addIssue({ code: "custom", message: problem });
  }) as unknown as z.ZodType<string | number, Input>;
}
/** Whether a valid duration is shorter than `ms`. */
function shorterThan(value: string | number, ms: number): boolean {
  return parseDurationMs(value) < ms;
}

/** A rule's window: calendar months allowed, a bare number not (is 3600 an hour?). */
const window = durationField<WindowDuration>({ months: true });
/** A fixed-length duration written with its unit. */
const duration = durationField<Duration>();

/** A path as the policy writes it: resolved into canonical form (core/path.ts) when loaded. */
const pathPrefix = z.string().superRefine((value, ctx) => {
  const problem = pathKeyProblem(value);
  if (problem !== undefined) ctx.addIssue({ code: "custom", message: problem });
});

const cidr = z.string().refine(isCidr, {
  message: "must be an IP address or range such as 203.0.113.7, 203.0.113.0/24 or 2001:db8::/32",
});

const method = z
  .string()
  .regex(/^[A-Za-z]+$/, { message: "must be an HTTP method such as GET or POST" })
  .transform((value) => value.toUpperCase());

const secretSource = z.union(
  [
    z.strictObject({ env: z.string().min(1) }),
    z.strictObject({ value: z.string().min(1) }),
    z.strictObject({ file: z.string().min(1) }),
  ],
  { error: "must be one of { env: NAME }, { value: SECRET } or { file: PATH }" },
);

export const limitNumber = z
  .number({ error: "must be a whole number of requests (0 or more)" })
  .int({ error: "must be a whole number of requests" })
  .nonnegative({ error: "must be 0 or more (0 refuses every request)" });

/**
 * Options that a rule has and that tiers, namespaces and `defaults` may set for their rules
 * (`edgelimit rls` takes some of them in an envoyproxy/ratelimit descriptor's metadata).
 */
export const ruleOptions = {
  window: window.optional(),
  algorithm: z.enum(["fixed-window", "sliding-window", "token-bucket"]).optional(),
  action: z.enum(["block", "challenge"]).optional(),
  challengeBand: z
    .number()
    .min(1, { error: "must be 1 or more (2 challenges up to twice the limit)" })
    .optional(),
  failMode: z.enum(["local", "open", "closed"]).optional(),
  disclose: z.boolean().optional(),
  shadow: z.boolean().optional(),
  cost: z.number().int().positive().optional(),
  backend: z.enum(["approximate", "exact"]).optional(),
  counting: z.enum(["exact", "hybrid"]).optional(),
};

const keyKind = z.enum(["ip", "user", "user-or-ip"]);

const ruleObject = z.strictObject({ limit: limitNumber, ...ruleOptions });

/**
 * A rule: a number is shorthand for `{ limit: N }`. The preprocess step takes anything, so its
 * input type is written out: the number, or the rule's own fields.
 */
export const ruleSpec = z.preprocess(
  (value) => (typeof value === "number" ? { limit: value } : value),
  ruleObject,
) as unknown as z.ZodType<z.output<typeof ruleObject>, number | z.input<typeof ruleObject>>;

const tierSpec = z.strictObject({
  ...ruleOptions,
  key: keyKind.optional(),
  global: ruleSpec.optional(),
  paths: z.record(pathPrefix, ruleSpec).optional(),
  plans: z.record(z.string().min(1), ruleSpec).optional(),
});

const namespaceRule = z.strictObject({
  name: z.string().regex(/^[A-Za-z0-9_.-]+$/, { message: "must be letters, digits, _ . or -" }),
  limit: limitNumber,
  key: keyKind.optional(),
  plans: z.array(z.string().min(1)).optional(),
  tiers: z.array(z.enum(["anonymous", "authenticated"])).optional(),
  ...ruleOptions,
});

const namespaceSpec = z.strictObject({
  match: z
    .strictObject({
      path: pathPrefix.optional(),
      methods: z.array(method).min(1).optional(),
    })
    .optional(),
  key: keyKind.optional(),
  limit: limitNumber.optional(),
  plans: z.array(z.string().min(1)).optional(),
  tiers: z.array(z.enum(["anonymous", "authenticated"])).optional(),
  rules: z.array(namespaceRule).min(1).optional(),
  ...ruleOptions,
});

const jwtSpec = z.strictObject({
  algorithms: z
    .array(z.enum(["HS256", "HS384", "HS512", "RS256", "ES256", "EdDSA"]))
    .min(1)
    .optional(),
  secret: secretSource.optional(),
  publicKey: secretSource.optional(),
  issuer: z.string().optional(),
  audience: z.string().optional(),
  userClaim: z.string().min(1).optional(),
  planClaim: z.string().min(1).optional(),
  from: z
    .string()
    .regex(/^(authorization|cookie:[A-Za-z0-9_.-]+)$/, {
      message: 'must be "authorization" (Bearer token) or "cookie:NAME"',
    })
    .optional(),
  clockTolerance: duration.optional(),
});

export const policySchema = z.strictObject({
  /** The JSON Schema an editor validates the file against (`edgelimit schema`); ignored here. */
  $schema: z.string().optional(),
  version: z.literal(1, { error: "must be 1 (the only policy format so far)" }).optional(),
  identity: z
    .strictObject({
      ip: z
        .strictObject({
          source: z.enum(["socket", "header", "x-forwarded-for"]).optional(),
          header: z.string().min(1).optional(),
          trustedProxies: z.array(cidr).optional(),
          ipv6Prefix: z.number().int().min(1).max(128).optional(),
        })
        .optional(),
      user: z
        .strictObject({
          jwt: jwtSpec.optional(),
          /**
           * The application passes users it has verified itself (a session) through the
           * middleware's `user` option; without this, that option is refused.
           */
          application: z.boolean().optional(),
          trustedHeader: z
            .strictObject({
              user: z.string().min(1),
              plan: z.string().min(1).optional(),
              from: z.enum(["trusted-proxies", "any"]).optional(),
            })
            .optional(),
        })
        .optional(),
    })
    .optional(),
  defaults: z.strictObject(ruleOptions).optional(),
  plans: z.strictObject({ default: z.string().min(1).optional() }).optional(),
  tiers: z
    .strictObject({ anonymous: tierSpec.optional(), authenticated: tierSpec.optional() })
    .optional(),
  namespaces: z
    .record(
      z
        .string()
        .regex(/^[A-Za-z0-9_.-]+$/, { message: "namespace names are letters, digits, _ . or -" }),
      namespaceSpec,
    )
    .optional(),
  /**
   * How rules' paths match requests. `caseSensitive`: whether letter case tells paths apart;
   * unset, as the framework routes where its adapter knows (Express: `case sensitive routing`,
   * off by default; Fastify and Hono: on), elsewhere every casing counts.
   */
  paths: z.strictObject({ caseSensitive: z.boolean().optional() }).optional(),
  failClosed: z.array(pathPrefix).optional(),
  allowlist: z.array(cidr).optional(),
  denylist: z.array(cidr).optional(),
  challenge: z
    .strictObject({
      path: pathPrefix.optional(),
      secret: secretSource.optional(),
      previousSecret: secretSource.optional(),
      policyId: z.string().min(1).optional(),
      passTtl: duration.optional(),
      challengeTtl: duration.optional(),
      difficulty: z
        .number()
        .int()
        .min(1)
        .max(32, { error: "must be 32 bits or fewer (each bit doubles the work)" })
        .optional(),
      cookie: z
        .strictObject({
          name: z
            .string()
            .regex(/^[A-Za-z0-9_-]+$/, { message: "must be letters, digits, _ or -" })
            .optional(),
          secure: z.boolean().optional(),
        })
        .optional(),
      provider: z
        .strictObject({
          kind: z.enum(["pow", "turnstile", "hcaptcha"]),
          siteKey: z.string().min(1).optional(),
          secret: secretSource.optional(),
          verifyUrl: z.string().url().optional(),
        })
        .superRefine((value, ctx) => {
          if (value.kind === "pow") return;
          if (value.siteKey === undefined)
            ctx.addIssue({
              code: "custom",
              path: ["siteKey"],
              message: `${value.kind} needs siteKey`,
            });
          if (value.secret === undefined)
            ctx.addIssue({
              code: "custom",
              path: ["secret"],
              message: `${value.kind} needs secret, e.g. { env: EDGELIMIT_CAPTCHA_SECRET }`,
            });
        })
        .optional(),
    })
    .optional(),
  lists: z
    .array(
      z
        .strictObject({
          name: z
            .string()
            .regex(/^[A-Za-z0-9_.-]+$/, { message: "must be letters, digits, _ . or -" }),
          kind: z.enum(["allow", "deny"]),
          refresh: duration.optional(),
          file: z.string().min(1).optional(),
          url: z.string().url().optional(),
          s3: z
            .strictObject({
              bucket: z.string().min(1),
              key: z.string().min(1),
              region: z.string().min(1),
              endpoint: z.string().url().optional(),
            })
            .optional(),
          dynamodb: z
            .strictObject({
              table: z.string().min(1),
              region: z.string().min(1),
              key: z.record(z.string().min(1), z.string()),
              attribute: z.string().min(1).optional(),
              endpoint: z.string().url().optional(),
            })
            .optional(),
        })
        .superRefine((value, ctx) => {
          const sources = (["file", "url", "s3", "dynamodb"] as const).filter(
            (name) => value[name] !== undefined,
          );
          if (sources.length !== 1) {
            ctx.addIssue({
              code: "custom",
              message: `a list needs exactly one source of file, url, s3 or dynamodb (got ${sources.join(", ") || "none"})`,
            });
          }
        }),
    )
    .optional(),
  /** Documented since the first release as milliseconds when bare (`budget: 50`). */
  budget: durationField<Budget>({ bareMilliseconds: true, maxMs: MAX_WAIT_MS }).optional(),
  connectBudget: durationField<Duration>({ maxMs: MAX_WAIT_MS }).optional(),
  unavailableRetryAfter: duration.optional(),
  /**
   * What operators' overrides may do (docs/overrides.md): the most a limit may be, which rules;
   * and how often every instance reads them (`refresh`, the propagation bound, default 5s).
   */
  overrides: z
    .strictObject({
      maxLimit: z.number().int().min(0).optional(),
      rules: z.array(z.string().min(1)).min(1).optional(),
      refresh: durationField<Duration>({ maxMs: MAX_WAIT_MS })
        .refine((value) => !(durationProblem(value, {}) === undefined && shorterThan(value, 100)), {
          message: "must be 100ms or more: every instance reads the store's overrides this often",
        })
        .optional(),
    })
    .optional(),
  headers: z
    .strictObject({
      legacy: z.boolean().optional(),
      draft: z.boolean().optional(),
      origin: z
        .string()
        .regex(/^[A-Za-z0-9-]+$/)
        .optional(),
    })
    .optional(),
});

export type PolicyInput = z.input<typeof policySchema>;
export type PolicySpec = z.output<typeof policySchema>;
export type RuleSpec = z.output<typeof ruleSpec>;
export type TierSpec = z.output<typeof tierSpec>;
export type NamespaceSpec = z.output<typeof namespaceSpec>;
export type RuleOptions = Partial<Pick<RuleSpec, keyof typeof ruleOptions>>;
