import { EdgelimitError } from "../../core/errors.js";
import type { RequestDescription } from "../../core/types.js";
import type { Verdict } from "../../http/respond.js";
import { createLimiter, type Limiter, type LimiterOptions } from "../../limiter.js";
import type { ResolvedPolicy } from "../../policy/types.js";
import type { ExecutionContextLike, WorkerEnv } from "./bindings.js";
import { checkCloudflarePolicy } from "./check.js";
import { CloudflareStore } from "./store.js";

export const DEFAULT_COUNTER_BINDING = "EDGELIMIT_COUNTER";

export interface CloudflareLimiterOptions {
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
   * that, or the exact rules fail open (see docs/cloudflare.md).
   */
  readonly budgetMs?: number;
  readonly clock?: () => number;
  readonly onDecision?: LimiterOptions["onDecision"];
  readonly blockCache?: LimiterOptions["blockCache"];
}

interface Prepared {
  readonly limiter: Limiter;
  /** Rules counted by the binding, whose remaining count is unknown. */
  readonly originHeader: string;
}

/**
 * One limiter per Worker `env` (an isolate sees one `env`; tests may pass several). Held in a
 * WeakMap owned by this instance, so it is bounded by the envs still alive.
 */
export class CloudflareLimiter {
  readonly #options: CloudflareLimiterOptions;
  readonly #prepared = new WeakMap<object, Prepared>();

  constructor(options: CloudflareLimiterOptions) {
    this.#options = options;
    if (typeof options.policy !== "function")
      assertCloudflarePolicy(options.policy, options.ratelimits);
  }

  /** The verdict for a Worker request. The client address is `CF-Connecting-IP` (see the policy). */
  async check(request: Request, env: WorkerEnv): Promise<Verdict> {
    return this.#prepare(env).limiter.check(describe(request));
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
  ): Promise<Response> {
    const prepared = this.#prepare(env);
    const verdict = await prepared.limiter.check(describe(request));
    const headers = verdict.headers;
    if (verdict.action !== "allow") {
      return new Response(verdict.body ?? null, { status: verdict.status, headers });
    }
    const forwarded = new Headers(request.headers);
    forwarded.delete(prepared.originHeader);
    for (const [name, value] of Object.entries(verdict.originHeaders)) forwarded.set(name, value);
    const upstream = await next(new Request(request, { headers: forwarded }));
    const response = new Response(upstream.body, upstream);
    for (const [name, value] of Object.entries(headers)) response.headers.set(name, value);
    return response;
  }

  #prepare(env: WorkerEnv): Prepared {
    const cached = this.#prepared.get(env);
    if (cached !== undefined) return cached;
    const options = this.#options;
    let policy = typeof options.policy === "function" ? options.policy(env) : options.policy;
    if (typeof options.policy === "function") assertCloudflarePolicy(policy, options.ratelimits);
    if (options.budgetMs !== undefined) policy = { ...policy, budgetMs: options.budgetMs };
    const store = new CloudflareStore({
      env,
      ratelimits: options.ratelimits,
      counter: options.counter ?? DEFAULT_COUNTER_BINDING,
    });
    const limiter = createLimiter({
      policy,
      store,
      env: stringsOf(env),
      ...(options.clock === undefined ? {} : { clock: options.clock }),
      ...(options.onDecision === undefined ? {} : { onDecision: options.onDecision }),
      ...(options.blockCache === undefined ? {} : { blockCache: options.blockCache }),
    });
    const prepared = { limiter, originHeader: policy.headers.origin };
    this.#prepared.set(env, prepared);
    return prepared;
  }
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

/**
 * Workers have no socket peer: the address comes from `CF-Connecting-IP`, which the policy names
 * (`identity.ip.source: header`). Cloudflare's edge sets it on every request it receives and
 * replaces any value the client sent, so nothing the client writes reaches the key.
 */
function describe(request: Request): RequestDescription {
  const url = new URL(request.url);
  return { method: request.method, path: url.pathname + url.search, headers: request.headers };
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
  const limiter = new CloudflareLimiter(options);
  return (request, env, _ctx, next) => limiter.handle(request, env, next);
}

/**
 * A Worker's default export: `export default createCloudflareHandler({ ..., origin })`. Without
 * `origin` the request goes on to the origin server behind the route (`fetch(request)`).
 */
export function createCloudflareHandler(
  options: CloudflareLimiterOptions & { readonly origin?: WorkerFetch },
): { fetch: WorkerFetch } {
  const limiter = new CloudflareLimiter(options);
  const origin = options.origin;
  return {
    fetch(request, env, ctx) {
      return limiter.handle(request, env, (forwarded) =>
        origin === undefined ? fetch(forwarded) : origin(forwarded, env, ctx),
      );
    },
  };
}
