/**
 * `edgelimit/node`: the limiter for Express and `node:http`. It translates an
 * `IncomingMessage` into the core's request description and a verdict into the response, and
 * can count the decisions as Prometheus metrics.
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import type { Registry } from "prom-client";
import type { ResolvedPolicy } from "../core/model.js";
import {
  checkArgument,
  checkOptions,
  isObject,
  type OptionsShape,
  required,
} from "../core/options.js";
import type { ForwardHeaders } from "../http/guard.js";
import { EXPRESS_RATE_LIMIT_OPTIONS, GUARD_OPTIONS, LIMITER } from "../http/guard-options.js";
import type { Verdict } from "../http/respond.js";
import type { Limiter } from "../limiter.js";
import { DecisionMetrics } from "../metrics/prometheus.js";
import {
  type CaseSensitiveRouting,
  type NodeGuard,
  type NodeGuardOptions,
  nodeGuard,
  type RateLimitedRequest,
  sendRefusal,
  setResponseHeaders,
  writeWebResponse,
} from "./node-guard.js";

export {
  describeNodeRequest,
  type NodeGuardOptions,
  type NodeOnRefused,
  type RateLimitedRequest,
  sendRefusal,
  toWebRequest,
  writeWebResponse,
} from "./node-guard.js";

/**
 * Express's `req.rateLimit`: the verdict, set by the middleware on every request it counted
 * (undefined on one `skip` passed uncounted). Express's types build their `Request` on the
 * global `Express.Request`, which is what is augmented here: it needs no dependency on
 * @types/express, and without them it declares an interface nothing uses. (Augmenting the module
 * "express-serve-static-core" instead fails this repository's TypeScript 7 build with TS2664.)
 */
declare global {
  namespace Express {
    interface Request {
      rateLimit?: Verdict;
    }
  }
}

export interface NodeRateLimitOptions extends NodeGuardOptions {
  readonly limiter: Limiter;
  /** Counts every decision (see `prometheusMetrics`). */
  readonly metrics?: NodeMetrics;
}

function nodeShape() {
  return {
    ...GUARD_OPTIONS,
    limiter: required(LIMITER),
    metrics: {
      describe: "metrics from prometheusMetrics(limiter)",
      test: (value) => isObject(value) && typeof value.record === "function",
    },
  } satisfies OptionsShape<NodeRateLimitOptions>;
}

/**
 * The options of `name`, checked as plain JavaScript may pass them, then its guard;
 * `caseSensitiveRouting` as `nodeGuard` takes it (default: Express's setting).
 */
function checkedGuard(
  name: string,
  options: NodeRateLimitOptions,
  ...caseSensitiveRouting: [CaseSensitiveRouting?]
): NodeGuard {
  if (typeof EDGELIMIT_BUNDLE === "undefined")
    checkOptions(name, options, nodeShape(), { foreign: EXPRESS_RATE_LIMIT_OPTIONS });
  return nodeGuard(name, options.limiter, options, ...caseSensitiveRouting);
}

/**
 * The decisions of one limiter as Prometheus metrics: the same names and labels as the
 * gateway's `/metrics` (`edgelimit_decisions_total`, `edgelimit_shadow_refusals_total`,
 * `edgelimit_decision_duration_seconds`, store errors, failed-open and failed-closed counts,
 * block cache hits). Follows the limiter's
 * policy across reloads. Serve `handler` where your scraper can reach it and the public cannot.
 */
export class NodeMetrics extends DecisionMetrics {
  readonly #limiter: Limiter;
  #policy: ResolvedPolicy;

  constructor(limiter: Limiter, options: { readonly registry?: Registry } = {}) {
    if (typeof EDGELIMIT_BUNDLE === "undefined") {
      checkArgument("prometheusMetrics", "the limiter (first argument)", limiter, LIMITER);
      checkOptions("prometheusMetrics", options, { registry: "object" });
    }
    super(limiter.policy, {
      registry: options.registry,
      blockCacheHits: () => limiter.blockCacheHits,
    });
    this.#limiter = limiter;
    this.#policy = limiter.policy;
  }

  /** Counts one decision (the middleware calls it; `limiter.check` callers may too). */
  record(verdict: Verdict): void {
    const policy = this.#limiter.policy;
    if (policy !== this.#policy) {
      this.#policy = policy;
      this.usePolicy(policy);
    }
    this.recordDecision(verdict);
  }

  /** A `node:http` / Express handler answering with the Prometheus text. */
  readonly handler = (_request: IncomingMessage, response: ServerResponse): void => {
    this.text().then(
      (body) => {
        response.writeHead(200, { "content-type": this.contentType, "cache-control": "no-store" });
        response.end(body);
      },
      () => {
        response.writeHead(500, { "content-type": "text/plain; charset=utf-8" });
        response.end("metrics unavailable\n");
      },
    );
  };
}

/**
 * Prometheus metrics for a limiter's decisions, in a registry of their own unless one is given:
 * `const metrics = prometheusMetrics(limiter); app.use(nodeRateLimit({ limiter, metrics }));
 * adminApp.get("/metrics", metrics.handler)`.
 */
export function prometheusMetrics(
  limiter: Limiter,
  options?: { readonly registry?: Registry },
): NodeMetrics {
  return new NodeMetrics(limiter, options);
}

/**
 * The request as the origin may see it: the client's copies of our headers dropped, ours set.
 * Node's header names are lower case, as the guard's are.
 */
function setForwardHeaders(request: IncomingMessage, forward: ForwardHeaders): void {
  const headers = request.headers;
  delete headers[forward.remove];
  for (const name in forward.set) headers[name] = forward.set[name];
}

/** The guard's action on one request in the middleware's terms (see `guardNodeRequest`). */
async function passes(
  guard: NodeGuard,
  metrics: NodeMetrics | undefined,
  request: IncomingMessage,
  response: ServerResponse,
): Promise<boolean> {
  const action = await guard.run(request, response);
  if (action.kind === "page") {
    await writeWebResponse(response, action.response);
    return false;
  }
  if (action.verdict !== undefined) {
    metrics?.record(action.verdict);
    (request as RateLimitedRequest).rateLimit = action.verdict;
  }
  switch (action.kind) {
    case "refuse":
      sendRefusal(response, action.verdict);
      return false;
    case "answered":
      return false;
    case "forward":
      setForwardHeaders(request, action);
      setResponseHeaders(response, action.respond);
      return true;
  }
}

/**
 * Decides one request. Returns true when it may go on (the rate-limit headers are set on the
 * response and the remaining count on the request), false when the response was already sent.
 * Builds the guard on every call: mounted for good, `nodeRateLimit` builds it once.
 */
export function guardNodeRequest(
  options: NodeRateLimitOptions,
  request: IncomingMessage,
  response: ServerResponse,
): Promise<boolean> {
  const guard = checkedGuard("guardNodeRequest", options);
  return passes(guard, options.metrics, request, response);
}

/**
 * Express middleware (`app.use(nodeRateLimit({ limiter }))`), also usable with `node:http`:
 * `createServer((req, res) => guard(req, res, () => handler(req, res)))`.
 */
export function nodeRateLimit(options: NodeRateLimitOptions) {
  const guard = checkedGuard("nodeRateLimit", options);
  return (
    request: IncomingMessage,
    response: ServerResponse,
    next: (error?: unknown) => void,
  ): void => {
    passes(guard, options.metrics, request, response).then(
      (proceed) => {
        if (proceed) next();
      },
      (error: unknown) => next(error),
    );
  };
}

/** What `fastifyRateLimit` needs of Fastify's request and reply (no dependency on Fastify). */
export interface FastifyLikeRequest {
  readonly raw: IncomingMessage;
  /** The Fastify instance: its router's `caseSensitive` says how paths are routed. */
  readonly server?: {
    readonly initialConfig?: {
      readonly caseSensitive?: boolean;
      readonly routerOptions?: { readonly caseSensitive?: boolean };
    };
  };
}
export interface FastifyLikeReply {
  readonly raw: ServerResponse;
  hijack(): unknown;
}

/**
 * Fastify hook (`app.addHook("onRequest", fastifyRateLimit({ limiter }))`): decides on the raw
 * Node request. A refusal is written to the raw response and the reply hijacked, so Fastify
 * sends nothing more; an allowed request carries the remaining count to the route in
 * `request.headers` and the rate-limit headers go out with the route's reply.
 */
export function fastifyRateLimit(options: NodeRateLimitOptions) {
  // Fastify's router is case-sensitive unless told otherwise (`routerOptions.caseSensitive`, or
  // the older top-level `caseSensitive`), once for the whole instance.
  const exact = checkedGuard("fastifyRateLimit", options, () => true);
  const anyCase = nodeGuard("fastifyRateLimit", options.limiter, options, () => false);
  return async (request: FastifyLikeRequest, reply: FastifyLikeReply): Promise<void> => {
    const config = request.server?.initialConfig;
    const caseSensitive = config?.routerOptions?.caseSensitive ?? config?.caseSensitive ?? true;
    const guard = caseSensitive ? exact : anyCase;
    if (!(await passes(guard, options.metrics, request.raw, reply.raw))) reply.hijack();
  };
}
