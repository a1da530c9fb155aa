import { createChallenge } from "../../challenge/index.js";
import { requireSharedChallengeSecret } from "../../challenge/shared-secret.js";
import { EdgelimitError } from "../../core/errors.js";
import { hybridCounting } from "../../core/hybrid-counting.js";
import type { ResolvedPolicy } from "../../core/model.js";
import {
  checkOptions,
  fields,
  type OptionsShape,
  POLICY,
  positiveMs,
  required,
} from "../../core/options.js";
import type { OverrideAdmin } from "../../core/override-admin.js";
import type { Peek } from "../../core/peek.js";
import type { ChallengeHandler } from "../../core/types.js";
import { checkGuardOptions } from "../../http/guard.js";
import { GUARD_OPTIONS } from "../../http/guard-options.js";
import type { Verdict } from "../../http/respond.js";
import { createLimiter, type Limiter, type LimiterOptions } from "../../limiter.js";
import {
  answerOf,
  describeRequest,
  forwardRequest,
  keepReading,
  type WebGuard,
  type WebGuardOptions,
  webGuard,
  withHeaders,
} from "../web.js";
import type { AreaOptions } from "./areas.js";
import type { ExecutionContextLike, WorkerEnv } from "./bindings.js";
import { approximateRules, bindingLimits, checkCloudflarePolicy } from "./check.js";
import {
  answerOverrideRoute,
  isOverrideRoute,
  type OverrideRouteOptions,
} from "./override-route.js";
import { CloudflareStore, DEFAULT_CALL_TIMEOUT_MS } from "./store.js";

export const DEFAULT_COUNTER_BINDING = "EDGELIMIT_COUNTER";
/** How old an isolate's copy of the overrides may grow before a request refreshes it. */
export const WORKER_OVERRIDE_REFRESH_MS = 5_000;
/** Longest a new isolate's first requests wait for its first read of the overrides. */
export const WORKER_OVERRIDE_FIRST_WAIT_MS = 500;

/**
 * `skip`, `cost`, `user` and `onRefused` are `edgelimit/fetch`'s, with the Worker's `env` as
 * their context.
 */
export interface CloudflareLimiterOptions extends Omit<WebGuardOptions<WorkerEnv>, "challenge"> {
  /**
   * The resolved policy, bundled as JSON at build time (never load YAML in a Worker), or a
   * function of `env` for a policy delivered as a var.
   */
  readonly policy: ResolvedPolicy | ((env: WorkerEnv) => ResolvedPolicy);
  /** Namespace (or rule id) -> name of its `ratelimits` binding in wrangler.toml. */
  readonly ratelimits: Readonly<Record<string, string>>;
  /** Durable Object namespace binding of `EdgelimitCounter` (default `EDGELIMIT_COUNTER`). */
  readonly counter?: string;
  /**
   * Overrides the policy's decision time budget. A Durable Object lives in one place, so a
   * request from the other side of the world pays a long round trip to it: size the budget for
   * that, or the exact rules apply their fail mode (by default each isolate counts them itself:
   * docs/cloudflare.md, "Time budget").
   */
  readonly budgetMs?: number;
  /**
   * A counter object's call still unanswered after this long has failed, and counts for that
   * object's circuit breaker. Default: the decision budget, and at least 1000 ms (a call that
   * fails before the budget ends would apply the rule's fail mode to a request that could still
   * have been counted).
   */
  readonly callTimeoutMs?: number;
  readonly clock?: () => number;
  readonly onDecision?: LimiterOptions["onDecision"];
  readonly blockCache?: LimiterOptions["blockCache"];
  /**
   * The challenge page, built per `env` when a request first needs the limiter (a Worker may
   * not draw random keys at start-up). By default it is built from the policy when an enforcing
   * rule challenges, with the Worker's secrets and vars as `env`, and needs `challenge.secret`:
   * a Worker runs in many isolates, and each would sign with a random key of its own. `false`:
   * no challenge page.
   */
  readonly challenge?:
    | false
    | ((policy: ResolvedPolicy, env: WorkerEnv) => ChallengeHandler | undefined);
  /**
   * Hybrid counting by area (docs/cloudflare.md, "Areas"): the hybrid rules of a request count
   * in its area's object of the subject, near the isolate, instead of in the rule's object in
   * one place; a subject's first request in a window in a far area is answered there. Off by
   * default.
   */
  readonly areas?: AreaOptions;
  /**
   * Operators' overrides, kept in the Durable Object `{overrides}` of the counter binding
   * (docs/overrides.md). Each isolate holds a copy; a request that finds it `refreshMs` old
   * (default 5 s) refreshes it beside itself (`ctx.waitUntil`), and a new isolate's first
   * requests wait for its first read at most `firstWaitMs` (default 500 ms). `admin` turns on
   * the route `edgelimit override` talks to (off by default; docs/cloudflare.md). Read when this
   * option is given or the policy has an `overrides:` section; `false`: none are read.
   */
  readonly overrides?:
    | false
    | {
        readonly refreshMs?: number;
        readonly firstWaitMs?: number;
        readonly admin?: OverrideRouteOptions;
      };
}

function cloudflareShape() {
  return {
    ...GUARD_OPTIONS,
    policy: required([POLICY, "function"]),
    ratelimits: required("object"),
    counter: "string",
    budgetMs: "number",
    callTimeoutMs: "number",
    clock: "function",
    onDecision: "function",
    blockCache: [false, fields({ maxKeys: "number" })],
    challenge: [false, "function"],
    areas: fields({ lease: required("string"), byContinent: "object" }),
    overrides: [
      false,
      fields({
        refreshMs: "number",
        firstWaitMs: "number",
        admin: fields({ path: "string", secret: "string" }),
      }),
    ],
  } satisfies OptionsShape<CloudflareLimiterOptions>;
}

/** `name`'s options (`origin` too for `createCloudflareHandler`), as plain JavaScript passes them. */
function checkCloudflareOptions(name: string, options: unknown, origin = false): void {
  if (typeof EDGELIMIT_BUNDLE !== "undefined") return;
  const shape = origin ? { ...cloudflareShape(), origin: "function" as const } : cloudflareShape();
  checkOptions(name, options, shape);
}

interface Prepared {
  readonly limiter: Limiter;
  readonly guard: WebGuard<WorkerEnv>;
  readonly store: CloudflareStore;
}

/** The Worker's request as workerd gives it: `cf` says where it arrived. */
function cfOf(request: Request): unknown {
  return (request as Request & { cf?: unknown }).cf;
}

/** The handler's name in the messages of options it refuses. */
const GUARD_NAME = "createCloudflareHandler";

/**
 * One limiter per Worker `env` (an isolate sees one `env`; tests may pass several). Held in a
 * WeakMap owned by this instance, so it is bounded by the envs still alive.
 */
export class CloudflareLimiter {
  readonly #options: CloudflareLimiterOptions;
  readonly #prepared = new WeakMap<object, Prepared>();

  constructor(options: CloudflareLimiterOptions) {
    checkCloudflareOptions("cloudflareLimiter", options);
    if (options.callTimeoutMs !== undefined) {
      positiveMs(options.callTimeoutMs, GUARD_NAME, "callTimeoutMs", "EL_BAD_OPTION");
    }
    this.#options = options;
    if (typeof options.policy !== "function") {
      assertCloudflarePolicy(options.policy, options.ratelimits);
      checkGuardOptions(GUARD_NAME, options.policy, options);
      if (options.challenge === undefined) requireWorkerChallengeSecret(options.policy);
    }
  }

  /**
   * The verdict for a Worker request. The client address is `CF-Connecting-IP` (see the policy).
   * `ctx`: the request's, so that a refresh of the overrides it begins outlives its answer.
   */
  async check(request: Request, env: WorkerEnv, ctx?: ExecutionContextLike): Promise<Verdict> {
    const prepared = this.#prepareFor(request, env);
    try {
      return await prepared.limiter.check(describeRequest(request, undefined));
    } finally {
      keepReading(prepared.limiter, ctx);
    }
  }

  /** `limiter.peek` for a Worker request: each matched rule's numbers, counting nothing. */
  async peek(request: Request, env: WorkerEnv, ctx?: ExecutionContextLike): Promise<Peek> {
    const prepared = this.#prepareFor(request, env);
    try {
      return await prepared.limiter.peek(describeRequest(request, undefined));
    } finally {
      keepReading(prepared.limiter, ctx);
    }
  }

  /**
   * The operators' overrides in the Durable Object `{overrides}`, with the same admin as
   * `limiter.overrides` elsewhere: `set`, `list`, `remove`, `changes`. A change applies at once
   * in this isolate, in the others within their refresh. Throws `EL_OVERRIDE_STORE` with
   * `overrides: false`.
   */
  overrides(env: WorkerEnv): OverrideAdmin {
    return this.#prepare(env).limiter.overrides;
  }

  /**
   * Runs the limiter and either answers the refusal itself or calls `next` with the request the
   * origin should see (the remaining count in the policy's origin header, a client's own copy
   * of that header dropped), then adds the rate-limit headers to the origin's response.
   */
  async handle(
    request: Request,
    env: WorkerEnv,
    next: (request: Request) => Response | Promise<Response>,
    ctx?: ExecutionContextLike,
  ): Promise<Response> {
    const prepared = this.#prepareFor(request, env);
    const route = this.#options.overrides === false ? undefined : this.#options.overrides?.admin;
    if (route !== undefined && isOverrideRoute(request, route)) {
      try {
        return await answerOverrideRoute(request, env, route, () => prepared.limiter.overrides);
      } finally {
        keepReading(prepared.limiter, ctx);
      }
    }
    let action: Awaited<ReturnType<WebGuard<WorkerEnv>["run"]>>;
    try {
      action = await prepared.guard.run(request, env);
    } finally {
      keepReading(prepared.limiter, ctx);
    }
    if (action.kind !== "forward") return answerOf(action) as Response;
    const upstream = await next(forwardRequest(request, action));
    return withHeaders(upstream, action.respond);
  }

  /** What `env` prepared, its store located by the request (areas: the isolate's area). */
  #prepareFor(request: Request, env: WorkerEnv): Prepared {
    const prepared = this.#prepare(env);
    prepared.store.locate(cfOf(request));
    return prepared;
  }

  #prepare(env: WorkerEnv): Prepared {
    const cached = this.#prepared.get(env);
    if (cached !== undefined) return cached;
    const options = this.#options;
    let policy = typeof options.policy === "function" ? options.policy(env) : options.policy;
    if (typeof options.policy === "function") assertCloudflarePolicy(policy, options.ratelimits);
    if (options.budgetMs !== undefined) policy = { ...policy, budgetMs: options.budgetMs };
    const challenge = challengeFor(options, policy, env);
    const counted = new CloudflareStore({
      env,
      ratelimits: options.ratelimits,
      counter: options.counter ?? DEFAULT_COUNTER_BINDING,
      approximate: approximateRules(policy),
      bindingLimits: bindingLimits(policy),
      callTimeoutMs: options.callTimeoutMs ?? Math.max(DEFAULT_CALL_TIMEOUT_MS, policy.budgetMs),
      ...(options.areas === undefined ? {} : { areas: options.areas }),
    });
    // Hybrid rules reserve in their Durable Objects (docs/policy.md, hybrid counting); with
    // areas, the area objects reserve for them (areas.ts).
    const hybrid =
      options.areas === undefined && policy.rules.some((rule) => rule.counting === "hybrid");
    const store = hybrid ? hybridCounting(counted) : counted;
    const limiter = createLimiter({
      overrides: overridesOf(options, policy),
      policy,
      store,
      env: stringsOf(env),
      passes: challenge?.passes,
      ...(options.clock === undefined ? {} : { clock: options.clock }),
      ...(options.onDecision === undefined ? {} : { onDecision: options.onDecision }),
      ...(options.blockCache === undefined ? {} : { blockCache: options.blockCache }),
    });
    // The address is CF-Connecting-IP, which the policy names (see docs/cloudflare.md).
    const guard = webGuard<WorkerEnv>(GUARD_NAME, limiter, { ...options, challenge }, (request) =>
      describeRequest(request, undefined),
    );
    const prepared = { limiter, guard, store: counted };
    this.#prepared.set(env, prepared);
    return prepared;
  }
}

/**
 * The limiter's `overrides` option: refreshed by requests (an isolate runs nothing between
 * them); each request hands the reads in flight to its `waitUntil` (`keepReading`).
 */
function overridesOf(
  options: CloudflareLimiterOptions,
  policy: ResolvedPolicy,
): LimiterOptions["overrides"] {
  // Read when asked for, or when the policy bounds them (its `overrides:` section), as the
  // Lambda@Edge build decides: every isolate pays a read per `refreshMs` and a new one waits for
  // its first, which a Worker whose operators never override should not.
  if (options.overrides === false) return false;
  if (options.overrides === undefined && policy.overrides === undefined) return false;
  return {
    refreshMs:
      options.overrides?.refreshMs ?? policy.overrides?.refreshMs ?? WORKER_OVERRIDE_REFRESH_MS,
    onRequest: { firstWaitMs: options.overrides?.firstWaitMs ?? WORKER_OVERRIDE_FIRST_WAIT_MS },
  };
}

/** Throws the issues `checkCloudflarePolicy` finds, with the same messages. */
export function assertCloudflarePolicy(
  policy: ResolvedPolicy,
  ratelimits?: Readonly<Record<string, string>>,
): void {
  const issues = checkCloudflarePolicy(policy, ratelimits);
  if (issues.length === 0) return;
  throw new EdgelimitError(
    "EL_POLICY_INVALID",
    `policy cannot run on Cloudflare:\n${issues.map((issue) => `  ${issue.path}: ${issue.message}`).join("\n")}`,
    issues,
  );
}

/** The challenge page for one `env`, as `CloudflareLimiterOptions.challenge` says. */
function challengeFor(
  options: CloudflareLimiterOptions,
  policy: ResolvedPolicy,
  env: WorkerEnv,
): ChallengeHandler | undefined {
  if (options.challenge === false) return undefined;
  if (options.challenge !== undefined) return options.challenge(policy, env);
  requireWorkerChallengeSecret(policy);
  return createChallenge(policy, { env: stringsOf(env) });
}

function requireWorkerChallengeSecret(policy: ResolvedPolicy): void {
  requireSharedChallengeSecret(policy, "a Worker runs in many isolates at once");
}

/** Only strings: secrets and vars. Bindings (objects) never reach the secret resolver. */
function stringsOf(env: WorkerEnv): Record<string, string> {
  const strings: Record<string, string> = {};
  for (const [name, value] of Object.entries(env))
    if (typeof value === "string") strings[name] = value;
  return strings;
}

export function cloudflareLimiter(options: CloudflareLimiterOptions): CloudflareLimiter {
  return new CloudflareLimiter(options);
}

export type WorkerFetch = (
  request: Request,
  env: WorkerEnv,
  ctx: ExecutionContextLike,
) => Response | Promise<Response>;

/**
 * Middleware form: `(request, env, ctx, next)`. Use it inside an existing Worker's `fetch` in
 * front of the code that does the expensive work.
 */
export function rateLimitMiddleware(
  options: CloudflareLimiterOptions,
): (
  request: Request,
  env: WorkerEnv,
  ctx: ExecutionContextLike,
  next: (request: Request) => Response | Promise<Response>,
) => Promise<Response> {
  checkCloudflareOptions("rateLimitMiddleware", options);
  const limiter = new CloudflareLimiter(options);
  return (request, env, ctx, next) => limiter.handle(request, env, next, ctx);
}

/**
 * A Worker's default export: `export default createCloudflareHandler({ ..., origin })`. Without
 * `origin` the request goes on to the origin server behind the route (`fetch(request)`).
 */
export function createCloudflareHandler(
  options: CloudflareLimiterOptions & { readonly origin?: WorkerFetch },
): { fetch: WorkerFetch } {
  checkCloudflareOptions("createCloudflareHandler", options, true);
  const { origin, ...limiterOptions } = options;
  const limiter = new CloudflareLimiter(limiterOptions);
  return {
    fetch(request, env, ctx) {
      return limiter.handle(
        request,
        env,
        (forwarded) => (origin === undefined ? fetch(forwarded) : origin(forwarded, env, ctx)),
        ctx,
      );
    },
  };
}
