/**
 * `ShouldRateLimit` against an envoyproxy/ratelimit configuration: each descriptor is matched to
 * its configured limit (descriptor-match.ts), whose rules are counted by the core's counting step
 * (core/count-step.ts: every limit's counters in one store call, with the budget, the block
 * cache and the fail modes, as every other entry), and the counts come back as one status per
 * descriptor, with that service's semantics:
 *
 * - an unknown domain, a descriptor with no limit, a limit another one `replaces`: OK, no limit;
 * - `unlimited`: OK, remaining 4294967295, nothing counted;
 * - a request's own limit (`limit` on the descriptor) replaces the configured one (known domains);
 * - `hits_addend`: the descriptor's own, else the request's, else 1 (0 checks without counting);
 *   descriptors of one call that count the same counter each add their hits (config-counters.ts);
 * - `shadow_mode`: counted and reported, always OK; `SHADOW_MODE` for every descriptor, where the
 *   statuses still say OVER_LIMIT and only the overall code is OK;
 * - `quota_mode`: over only when every quota descriptor of the request is over;
 * - OVER_LIMIT overall when any other descriptor is over, with `Retry-After`.
 *
 * Unlike envoyproxy/ratelimit, a refused request is not counted on the descriptors that would
 * have admitted it (the core's rule for every store; its `STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT`
 * comes close), and a limit's counter is kept across windows by the store, not by a key per window.
 */
import type { CountingStep } from "../core/count-step.js";
import { EdgelimitError } from "../core/errors.js";
import { escapeKeyPart } from "../core/keys.js";
import type { CallTerms, CountedDecision } from "../core/outcome.js";
import type { CounterSpec, CounterState } from "../core/types.js";
import { type DecisionRecord, type RlsAnswer, retryAfterHeader } from "./answer.js";
import { type ConfiguredLimit, descriptorRules, type RlsConfig, reportedLimits } from "./config.js";
import { CallCounters, type CounterSlot, descriptorState } from "./config-counters.js";
import { shadowRefusals } from "./config-shadow.js";
import { findLimit } from "./descriptor-match.js";
import { NO_EXTENSION } from "./extension.js";
import {
  CODE,
  type DescriptorEntry,
  type DescriptorStatus,
  type HeaderValue,
  type RateLimitDescriptor,
  type RateLimitRequest,
  type RateLimitResponse,
  UNIT_SECONDS,
  type Unit,
} from "./messages.js";

const MAX_UINT32 = 4_294_967_295;

export interface ConfigDecideOptions {
  /** envoyproxy/ratelimit's `SHADOW_MODE`: the overall code is always OK. */
  readonly globalShadow: boolean;
  /**
   * envoyproxy/ratelimit's `LIMIT_RESPONSE_HEADERS_ENABLED`: the names of the limit, remaining
   * and reset headers to add for the descriptor closest to its limit.
   */
  readonly limitHeaders:
    | { readonly limit: string; readonly remaining: string; readonly reset: string }
    | undefined;
  readonly clock: () => number;
}

/** One descriptor's part in the request: the limit it is held to and where its rules count. */
interface Held {
  readonly limit: ConfiguredLimit;
  /** One for each of the limit's rules, in their order. */
  readonly slots: readonly CounterSlot[];
}

const OK_NO_LIMIT: DescriptorStatus = Object.freeze({
  code: CODE.OK,
  currentLimit: undefined,
  limitRemaining: 0,
  durationUntilResetMs: undefined,
});

const OK_UNLIMITED: DescriptorStatus = Object.freeze({
  code: CODE.OK,
  currentLimit: undefined,
  limitRemaining: MAX_UINT32,
  durationUntilResetMs: undefined,
});

const NO_HEADERS: readonly HeaderValue[] = Object.freeze([]);

/**
 * `step` counts on the service's store, under `terms` (the `--policy`'s budget, or the
 * defaults when there is none).
 */
export function decideByConfig(
  step: CountingStep,
  terms: CallTerms,
  config: RlsConfig,
  request: RateLimitRequest,
  options: ConfigDecideOptions,
): RlsAnswer | Promise<RlsAnswer> {
  checkRequest(request);
  const { domain, descriptors } = request;
  const known = config.domains.has(domain);
  const held: (Held | undefined)[] = new Array(descriptors.length);
  const unlimited: boolean[] = new Array(descriptors.length).fill(false);
  const call = new CallCounters();
  // A descriptor without entries names nothing to count (Envoy never sends one).
  const matched = descriptors.map((descriptor) =>
    known && descriptor.entries.length > 0 ? limitOf(config, domain, descriptor) : undefined,
  );
  const replaced = new Set<string>();
  for (const found of matched) for (const name of found?.limit.replaces ?? []) replaced.add(name);
  let subject = "";
  descriptors.forEach((descriptor, index) => {
    const found = matched[index];
    if (found === undefined) return;
    const { limit } = found;
    if (limit.unlimited) {
      unlimited[index] = true;
      return;
    }
    if (limit.name !== "" && replaced.has(limit.name)) return;
    const cost = descriptor.hitsAddend ?? Math.max(1, request.hitsAddend);
    const values = descriptor.entries.map((entry, at) => found.sharedValues?.[at] ?? entry.value);
    const counted = call.add(limit, domain, descriptor.entries, values, cost);
    if (subject === "") subject = counted.subject;
    held[index] = { limit, slots: counted.slots };
  });
  const respond = (
    statuses: DescriptorStatus[],
    record: DecisionRecord,
    retryAfterMs: number,
    overRules: readonly (string | undefined)[] = [],
  ) => answer(statuses, held, record, retryAfterMs, overRules, options);
  const { rules, counters } = call;
  if (counters.length === 0) {
    const statuses = descriptors.map((_, index) => (unlimited[index] ? OK_UNLIMITED : OK_NO_LIMIT));
    return respond(statuses, noRuleRecord(domain), 0);
  }
  const started = options.clock();
  // A domain is never a path, so no `failClosed` prefix of a policy applies to it.
  const decided = step.count({
    terms,
    rules,
    counters,
    failClosed: false,
    passVerified: false,
    now: started,
    request: undefined,
  });
  const conclude = (decision: CountedDecision): RlsAnswer => {
    const record: DecisionRecord = {
      action: decision.action,
      reason: decision.reason,
      rule: decision.rule?.id,
      tier: "anonymous",
      subject,
      durationMs: options.clock() - started,
      shadowed: [],
    };
    if (decision.action === "unavailable") {
      return {
        response: undefined,
        unavailable: {
          cause: decision.storeError ?? "the store failed",
          retryAfterSeconds: decision.retryAfterSeconds,
        },
        record,
      };
    }
    const now = options.clock();
    const states = new Map<string, CounterState>();
    for (const outcome of decision.outcomes) states.set(outcome.key, outcome.state);
    let retryAfterMs = decision.action === "block" ? decision.retryAfterSeconds * 1000 : 0;
    // The rule binding each descriptor over its limit, enforced or not (for shadow refusals).
    const overRules: (string | undefined)[] = new Array(descriptors.length);
    const admitted = decision.action === "allow";
    const statuses = descriptors.map((_, index): DescriptorStatus => {
      if (unlimited[index]) return OK_UNLIMITED;
      const part = held[index];
      if (part === undefined) return OK_NO_LIMIT;
      const binding = descriptorState(counters, states, part.slots, admitted);
      if (binding === undefined) {
        // The store failed open, or a cached block answered for another descriptor: this one's
        // count is not known.
        return { ...OK_NO_LIMIT, currentLimit: part.limit.reported[0] };
      }
      const { state, rule } = binding;
      if (!state.allowed) {
        overRules[index] = (
          counters[(part.slots[rule] as CounterSlot).index] as CounterSpec
        ).ruleId;
      }
      const over = !state.allowed && !part.limit.shadowMode;
      if (over && part.limit.quotaMode) retryAfterMs = Math.max(retryAfterMs, state.retryAfterMs);
      return {
        code: over ? CODE.OVER_LIMIT : CODE.OK,
        currentLimit: part.limit.reported[rule],
        limitRemaining: Math.min(MAX_UINT32, state.remaining),
        durationUntilResetMs: Math.max(0, state.resetAt - now),
      };
    });
    return respond(statuses, record, retryAfterMs, overRules);
  };
  return decided instanceof Promise ? decided.then(conclude) : conclude(decided);
}

function checkRequest(request: RateLimitRequest): void {
  if (request.domain === "") {
    throw new EdgelimitError("EL_RLS_REQUEST", "rate limit domain must not be empty");
  }
  if (request.descriptors.length === 0) {
    throw new EdgelimitError("EL_RLS_REQUEST", "rate limit descriptor list must not be empty");
  }
}

/** The configured limit, or the request's own where the descriptor carries one. */
function limitOf(
  config: RlsConfig,
  domain: string,
  descriptor: RateLimitDescriptor,
):
  | { limit: ConfiguredLimit; sharedValues: readonly (string | undefined)[] | undefined }
  | undefined {
  const override = descriptor.limit;
  if (override === undefined) return findLimit(config, domain, descriptor.entries);
  const unit = override.unit in UNIT_SECONDS ? (override.unit as Exclude<Unit, 0>) : undefined;
  if (unit === undefined) {
    throw new EdgelimitError(
      "EL_RLS_REQUEST",
      `the descriptor's limit override has unit ${override.unit}, which is not a unit (SECOND to YEAR)`,
    );
  }
  // Counted under the same key as the configured limit would be (the entries), in the
  // override's window: a changed override keeps its count while its window is the same.
  const fullKey = `${domain}.${descriptor.entries.map(compositeOf).join(".")}`;
  const rules = descriptorRules(
    `${domain}.override`,
    override.requestsPerUnit,
    unit,
    NO_EXTENSION,
    {
      observe: false,
    },
  );
  return {
    limit: {
      fullKey,
      requestsPerUnit: override.requestsPerUnit,
      unit,
      unlimited: false,
      name: "",
      replaces: [],
      shadowMode: false,
      quotaMode: false,
      rules,
      reported: reportedLimits("", override.requestsPerUnit, rules),
    },
    sharedValues: undefined,
  };
}

function compositeOf(entry: DescriptorEntry): string {
  return entry.value === "" ? entry.key : `${entry.key}_${entry.value}`;
}

function noRuleRecord(domain: string): DecisionRecord {
  return {
    action: "allow",
    reason: "no-rule",
    rule: undefined,
    tier: "anonymous",
    subject: `rls:${escapeKeyPart(domain)}`,
    durationMs: 0,
    shadowed: [],
  };
}

/** The statuses as a response: the overall code, and the headers that go with it. */
function answer(
  statuses: DescriptorStatus[],
  held: readonly (Held | undefined)[],
  record: DecisionRecord,
  retryAfterMs: number,
  overRules: readonly (string | undefined)[],
  options: ConfigDecideOptions,
): RlsAnswer {
  let overRateLimit = false;
  let quotas = 0;
  let quotasOver = 0;
  statuses.forEach((status, index) => {
    const quota = held[index]?.limit.quotaMode === true;
    if (quota) quotas++;
    if (status.code !== CODE.OVER_LIMIT) return;
    if (quota) quotasOver++;
    else overRateLimit = true;
  });
  const quotasRefused = quotas > 0 && quotasOver === quotas;
  const over = !options.globalShadow && (overRateLimit || quotasRefused);
  const headers: HeaderValue[] = [];
  if (over) headers.push(retryAfterHeader(retryAfterMs));
  if (options.limitHeaders !== undefined) limitHeaders(headers, statuses, options.limitHeaders);
  const response: RateLimitResponse = {
    overallCode: over ? CODE.OVER_LIMIT : CODE.OK,
    statuses,
    responseHeadersToAdd: headers.length === 0 ? NO_HEADERS : headers,
    requestHeadersToAdd: NO_HEADERS,
  };
  // A quota over its limit refuses with no core rule refusing; shadow rules refuse nothing.
  const action = over ? "block" : "allow";
  const reason = record.action === action ? record.reason : over ? "over-limit" : "within-limit";
  const shadowed = shadowRefusals(
    held.map((part) => part?.limit),
    statuses,
    overRules,
    {
      globalShadowRefused: options.globalShadow && (overRateLimit || quotasRefused),
      quotasRefused,
    },
  );
  return { response, unavailable: undefined, record: { ...record, action, reason, shadowed } };
}

/** envoyproxy/ratelimit's optional headers: the descriptor over its limit, else the fullest. */
function limitHeaders(
  headers: HeaderValue[],
  statuses: readonly DescriptorStatus[],
  names: NonNullable<ConfigDecideOptions["limitHeaders"]>,
): void {
  let chosen: DescriptorStatus | undefined;
  for (const status of statuses) {
    if (status.currentLimit === undefined) continue;
    if (status.code === CODE.OVER_LIMIT) {
      chosen = status;
      break;
    }
    if (chosen === undefined || status.limitRemaining < chosen.limitRemaining) chosen = status;
  }
  if (chosen?.currentLimit === undefined) return;
  headers.push(
    { key: names.limit, value: String(chosen.currentLimit.requestsPerUnit) },
    {
      key: names.remaining,
      value: String(chosen.code === CODE.OVER_LIMIT ? 0 : chosen.limitRemaining),
    },
    { key: names.reset, value: String(Math.ceil((chosen.durationUntilResetMs ?? 0) / 1000)) },
  );
}
