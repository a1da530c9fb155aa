/**
 * `ShouldRateLimit` against an edgelimit policy (`--policy`). The descriptors of one call
 * describe one HTTP request as the proxy saw it, entry by entry:
 *
 * - `remote_address` (Envoy's `remote_address` action): the client's address, as the proxy
 *   says. It is believed as `X-Forwarded-For` is in a policy: only when the proxy (the gRPC
 *   peer) is one of `identity.ip.trustedProxies` and the policy reads `x-forwarded-for`;
 * - `path` or `:path` (a `request_headers` action on `:path`): the path, with its query;
 * - `method` or `:method`: the method;
 * - any other key: a request header of that name (`authorization` carries the JWT the policy
 *   verifies; a user id header is believed only as the policy's `trustedHeader` says).
 *
 * Every descriptor's entries are merged (the first of a key wins) and the policy decides once,
 * counting every matched rule in one store call; each descriptor's status is the decision's.
 * The request's `hits_addend` is the request's cost; a call whose every descriptor says
 * `hits_addend: 0` counts nothing and is answered by `limiter.peek` (policy-peek.ts).
 * docs/proxies.md has the Envoy route.
 */
import type { ResolvedPolicy } from "../core/model.js";
import type { RequestDescription } from "../core/types.js";
import type { Verdict } from "../http/respond.js";
import type { Limiter } from "../limiter.js";
import type { RlsAnswer } from "./answer.js";
import {
  CODE,
  type DescriptorStatus,
  type HeaderValue,
  type RateLimitRequest,
  UNIT,
  unitOfWindow,
} from "./messages.js";
import { isPeek, peekAnswer } from "./policy-peek.js";

/** Headers of a refusal that describe its body, which Envoy writes itself. */
const BODY_HEADERS = new Set(["content-type", "content-length"]);

export function describeRequest(
  request: RateLimitRequest,
  peer: string | undefined,
): RequestDescription {
  const headers: Record<string, string> = {};
  let path: string | undefined;
  let method: string | undefined;
  for (const descriptor of request.descriptors) {
    for (const { key, value } of descriptor.entries) {
      const name = key.toLowerCase();
      if (name === "remote_address") headers["x-forwarded-for"] ??= value;
      else if (name === "path" || name === ":path") path ??= value;
      else if (name === "method" || name === ":method") method ??= value;
      else if (name !== "x-forwarded-for") headers[name] ??= value;
    }
  }
  return {
    ip: peer,
    method: method ?? "GET",
    path: path ?? "/",
    headers,
    lowerCaseHeaders: true,
    cost: request.hitsAddend > 0 ? request.hitsAddend : undefined,
  };
}

/** Decides `ShouldRateLimit` calls with a limiter, whose policy may be reloaded meanwhile. */
export class PolicyDecider {
  readonly #limiter: Limiter;
  readonly #clock: () => number;
  /** Each rule's window as a unit, for the policy they were computed from. */
  #units:
    | { readonly policy: ResolvedPolicy; readonly byRule: ReadonlyMap<string, number> }
    | undefined;

  constructor(limiter: Limiter, clock: () => number) {
    this.#limiter = limiter;
    this.#clock = clock;
  }

  decide(request: RateLimitRequest, peer: string | undefined): RlsAnswer | Promise<RlsAnswer> {
    if (isPeek(request)) return this.#peek(request, peer);
    const decided = this.#limiter.decide(describeRequest(request, peer));
    if (decided instanceof Promise)
      return decided.then((verdict) => this.#answer(verdict, request));
    return this.#answer(decided, request);
  }

  /** Every descriptor says `hits_addend: 0`: `limiter.peek` answers (policy-peek.ts). */
  async #peek(request: RateLimitRequest, peer: string | undefined): Promise<RlsAnswer> {
    const started = this.#clock();
    const peek = await this.#limiter.peek(describeRequest(request, peer));
    const now = this.#clock();
    const unitOf = (ruleId: string) => this.#unitOf(ruleId);
    return peekAnswer(peek, request, this.#limiter.policy, unitOf, now, now - started);
  }

  #answer(verdict: Verdict, request: RateLimitRequest): RlsAnswer {
    if (verdict.action === "unavailable") {
      return {
        response: undefined,
        unavailable: {
          cause: verdict.storeError ?? "the store failed",
          retryAfterSeconds: verdict.retryAfterSeconds,
        },
        record: verdict,
      };
    }
    const code = verdict.action === "allow" ? CODE.OK : CODE.OVER_LIMIT;
    const status: DescriptorStatus =
      verdict.rule === undefined || verdict.reset === 0
        ? { code, currentLimit: undefined, limitRemaining: 0, durationUntilResetMs: undefined }
        : {
            code,
            currentLimit: {
              name: verdict.rule,
              requestsPerUnit: verdict.limit,
              unit: this.#unitOf(verdict.rule),
            },
            limitRemaining: verdict.remaining,
            durationUntilResetMs: Math.max(0, verdict.reset * 1000 - this.#clock()),
          };
    const responseHeaders: HeaderValue[] = [];
    for (const [key, value] of Object.entries(verdict.headers)) {
      if (!BODY_HEADERS.has(key)) responseHeaders.push({ key, value });
    }
    const requestHeaders: HeaderValue[] = [];
    for (const [key, value] of Object.entries(verdict.originHeaders)) {
      requestHeaders.push({ key, value });
    }
    return {
      response: {
        overallCode: code,
        statuses: request.descriptors.map(() => status),
        responseHeadersToAdd: responseHeaders,
        requestHeadersToAdd: requestHeaders,
      },
      unavailable: undefined,
      record: verdict,
    };
  }

  /** The unit a rule's window is exactly (a policy's 60s is MINUTE); UNKNOWN otherwise. */
  #unitOf(ruleId: string): number {
    const policy = this.#limiter.policy;
    let units = this.#units;
    if (units?.policy !== policy) {
      const byRule = new Map<string, number>();
      for (const rule of policy.rules) byRule.set(rule.id, unitOfWindow(rule.window));
      units = { policy, byRule };
      this.#units = units;
    }
    return units.byRule.get(ruleId) ?? UNIT.UNKNOWN;
  }
}
