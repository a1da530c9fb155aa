/**
 * `edgelimit/node`: the limiter for Express and `node:http`. It translates an
 * `IncomingMessage` into the core's request description and a verdict into the response, and
 * can count the decisions as Prometheus metrics.
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import { Readable } from "node:stream";
import type { Registry } from "prom-client";
import type { ResolvedPolicy } from "../core/model.js";
import type { ChallengeHandler, RequestDescription } from "../core/types.js";
import {
  type ApplicationUser,
  type ForwardHeaders,
  Guard,
  type GuardLimiter,
  type GuardTranslation,
} from "../http/guard.js";
import type { Verdict } from "../http/respond.js";
import type { Limiter } from "../limiter.js";
import { DecisionMetrics } from "../metrics/prometheus.js";

/**
 * What every Node guard offers (the middleware here and the gateway): the guard's options as
 * functions of Node's request.
 */
export interface NodeGuardOptions {
  /** Requests for which this returns true pass uncounted, with no rate-limit headers. */
  readonly skip?: (request: IncomingMessage) => boolean | Promise<boolean>;
  /** Units this request costs (default: each rule's `cost`, 1 unless the policy says). */
  readonly cost?: (request: IncomingMessage) => number | undefined;
  /**
   * The user your application has verified for this request (its session), counted as that
   * user. The policy must allow it (`identity.user.application: true`); a token or trusted
   * header the policy names comes first. Never derive it from what the client sent unchecked.
   */
  readonly user?: (request: IncomingMessage) => ApplicationUser | undefined;
  /**
   * Writes the answer to a refused request instead of the default (429 with a JSON body, 302 to
   * the challenge, 503 when failing closed). The verdict's `headers` (`Retry-After`,
   * `RateLimit`, ...) are set on the response before it is called.
   */
  readonly onRefused?: (
    request: IncomingMessage,
    response: ServerResponse,
    verdict: Verdict,
  ) => void | Promise<void>;
}

export interface NodeRateLimitOptions extends NodeGuardOptions {
  readonly limiter: Limiter;
  /** Serves the challenge page under its path when the policy challenges. */
  readonly challenge?: ChallengeHandler;
  /** Counts every decision (see `prometheusMetrics`). */
  readonly metrics?: NodeMetrics;
}

/** A request after the middleware: the verdict, as Express users know from `req.rateLimit`. */
export interface RateLimitedRequest extends IncomingMessage {
  rateLimit?: Verdict;
}

/**
 * The decisions of one limiter as Prometheus metrics: the same names and labels as the
 * gateway's `/metrics` (`edgelimit_decisions_total`, `edgelimit_decision_duration_seconds`,
 * store errors, failed-open and failed-closed counts, block cache hits). Follows the limiter's
 * policy across reloads. Serve `handler` where your scraper can reach it and the public cannot.
 */
export class NodeMetrics extends DecisionMetrics {
  readonly #limiter: Limiter;
  #policy: ResolvedPolicy;

  constructor(limiter: Limiter, options: { readonly registry?: Registry } = {}) {
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
 * Describes a Node request for the core. The address is the socket peer's, never a header (a
 * Unix socket has none: the request is then counted as `ip:unknown`); Node writes every header
 * name in lower case.
 */
export function describeNodeRequest(request: IncomingMessage): RequestDescription {
  const url = (request as IncomingMessage & { originalUrl?: string }).originalUrl ?? request.url;
  return {
    ip: request.socket.remoteAddress,
    method: request.method,
    path: url ?? "/",
    headers: request.headers,
    lowerCaseHeaders: true,
  };
}

/** Writes a refused verdict (429, 302, 503, 403) as the response. */
export function sendRefusal(response: ServerResponse, verdict: Verdict): void {
  response.writeHead(verdict.status, verdict.headers);
  response.end(verdict.body);
}

const NODE_REQUESTS: GuardTranslation<IncomingMessage, ServerResponse> = {
  describe: describeNodeRequest,
  webRequest: toWebRequest,
};

/**
 * The guard on Node's request and response, for the middleware here and the gateway. The
 * response is the guard's context: `onRefused` writes to it, with the verdict's headers set
 * first and the verdict on `request.rateLimit`.
 */
export function nodeGuard(
  name: string,
  limiter: GuardLimiter,
  challenge: ChallengeHandler | undefined,
  options: NodeGuardOptions,
): Guard<IncomingMessage, ServerResponse, void> {
  const onRefused = options.onRefused;
  return new Guard(
    name,
    limiter,
    {
      challenge,
      skip: options.skip,
      cost: options.cost,
      user: options.user,
      onRefused:
        onRefused === undefined
          ? undefined
          : (request, response, verdict) => {
              (request as RateLimitedRequest).rateLimit = verdict;
              setResponseHeaders(response, verdict.headers);
              return onRefused(request, response, verdict);
            },
    },
    NODE_REQUESTS,
  );
}

/**
 * The request as the origin may see it: the client's copies of our headers dropped, ours set.
 * Node's header names are lower case, as the guard's are.
 */
export function setForwardHeaders(request: IncomingMessage, forward: ForwardHeaders): void {
  const headers = request.headers;
  delete headers[forward.remove];
  for (const name in forward.set) headers[name] = forward.set[name];
}

function setResponseHeaders(
  response: ServerResponse,
  headers: Readonly<Record<string, string>>,
): void {
  for (const name in headers) response.setHeader(name, headers[name] as string);
}

/**
 * Runs a Node guard on one request. Returns true when it may go on (the rate-limit headers are
 * set on the response and the remaining count on the request), false when the response was
 * already sent.
 */
async function passes(
  guard: Guard<IncomingMessage, ServerResponse, void>,
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
  const guard = nodeGuard("guardNodeRequest", options.limiter, options.challenge, options);
  return passes(guard, options.metrics, request, response);
}

/**
 * Express middleware (`app.use(nodeRateLimit({ limiter }))`), also usable with `node:http`:
 * `createServer((req, res) => guard(req, res, () => handler(req, res)))`.
 */
export function nodeRateLimit(options: NodeRateLimitOptions) {
  const guard = nodeGuard("nodeRateLimit", options.limiter, options.challenge, options);
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
  const guard = nodeGuard("fastifyRateLimit", options.limiter, options.challenge, options);
  return async (request: FastifyLikeRequest, reply: FastifyLikeReply): Promise<void> => {
    if (!(await passes(guard, options.metrics, request.raw, reply.raw))) reply.hijack();
  };
}

/** A Web `Request` for a Node request (used to mount Web-standard handlers such as the challenge). */
export function toWebRequest(request: IncomingMessage): Request {
  let url: URL;
  try {
    url = new URL(request.url ?? "/", `http://${request.headers.host ?? "localhost"}`);
  } catch {
    // A Host header that is not a host name must not break the page.
    url = new URL(request.url ?? "/", "http://localhost");
  }
  const headers = new Headers();
  for (const [name, value] of Object.entries(request.headers)) {
    if (value === undefined) continue;
    if (Array.isArray(value)) for (const item of value) headers.append(name, item);
    else headers.set(name, value);
  }
  const method = request.method ?? "GET";
  const hasBody = method !== "GET" && method !== "HEAD";
  return new Request(url, {
    method,
    headers,
    body: hasBody ? (Readable.toWeb(request) as ReadableStream<Uint8Array>) : undefined,
    // Required by undici when the body is a stream.
    ...(hasBody ? { duplex: "half" } : {}),
  } as RequestInit);
}

/** Writes a Web `Response` to a Node response, streaming its body. */
export async function writeWebResponse(response: ServerResponse, answer: Response): Promise<void> {
  const headers: Record<string, string | string[]> = {};
  answer.headers.forEach((value, name) => {
    if (name === "set-cookie") return;
    headers[name] = value;
  });
  const cookies = answer.headers.getSetCookie();
  if (cookies.length > 0) headers["set-cookie"] = cookies;
  response.writeHead(answer.status, headers);
  if (answer.body === null) {
    response.end();
    return;
  }
  const reader = answer.body.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    if (!response.write(value)) await new Promise((resolve) => response.once("drain", resolve));
  }
  response.end();
}
