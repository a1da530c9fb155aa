import type { Decision } from "../core/decision.js";
import { DecisionEngine } from "../core/engine.js";
import type { ResolvedPolicy } from "../core/model.js";
import type { RequestDescription } from "../core/types.js";
import { type MemoryStore, memoryStore } from "../stores/memory.js";
import type { LogRecord } from "./record.js";
import { Tally } from "./tally.js";

/** Headers that carry `--user-field` and `--plan-field` to the limiter (never a client's). */
const USER_HEADER = "x-edgelimit-replay-user";
const PLAN_HEADER = "x-edgelimit-replay-plan";
/**
 * The policy as replay applies it. The log's client address is the peer: the layer that wrote
 * the log saw that address itself, while a forwarded header in a log is what the client wrote
 * (CloudFront's `x-forwarded-for` field) and is never believed. With `--user-field`, the user
 * comes from the log through a header only replay sets; without it every request is anonymous.
 */
export function replayPolicy(policy: ResolvedPolicy, withUsers: boolean): ResolvedPolicy {
  return {
    ...policy,
    identity: {
      ...policy.identity,
      ip: { ...policy.identity.ip, source: "socket" },
      trustedHeader: withUsers ? { user: USER_HEADER, plan: PLAN_HEADER, from: "any" } : undefined,
    },
    // Refreshing allow/deny sources (file, HTTP, S3, DynamoDB) are not fetched by replay; the
    // policy's own allowlist and denylist apply.
    lists: [],
  };
}

/**
 * One policy driven over the log's time: the real decision engine and memory store, a virtual
 * clock. Replay needs decisions, not HTTP answers, so it runs the engine without the presenter;
 * it verifies no tokens (a log carries none), so the policy's secrets are never read.
 */
export class PolicyReplay {
  readonly file: string;
  readonly policy: ResolvedPolicy;
  readonly tally: Tally;
  readonly store: MemoryStore;
  readonly #engine: DecisionEngine;
  #now = 0;

  constructor(file: string, policy: ResolvedPolicy, withUsers: boolean) {
    this.file = file;
    this.policy = replayPolicy(policy, withUsers);
    this.store = memoryStore();
    this.#engine = new DecisionEngine({
      policy: this.policy,
      store: this.store,
      clock: () => this.#now,
      blockCache: false,
    });
    this.tally = new Tally(this.policy.rules);
  }

  /** Decides one record; synchronous unless the limiter has to wait (it does not here). */
  replay(record: LogRecord): undefined | Promise<void> {
    this.#now = record.time;
    const decision = this.#engine.decide(requestOf(record));
    if (decision instanceof Promise) {
      return decision.then((settled) => {
        this.tally.add(record, settled);
      });
    }
    this.tally.add(record, decision);
    return undefined;
  }

  /** The decision for one record, for tests that look at a single one. */
  decide(record: LogRecord): Decision | Promise<Decision> {
    this.#now = record.time;
    return this.#engine.decide(requestOf(record));
  }
}

function requestOf(record: LogRecord): RequestDescription {
  if (record.user === undefined) {
    return { ip: record.ip, method: record.method, path: record.path };
  }
  const headers: Record<string, string> = { [USER_HEADER]: record.user };
  if (record.plan !== undefined) headers[PLAN_HEADER] = record.plan;
  return {
    ip: record.ip,
    method: record.method,
    path: record.path,
    headers,
    lowerCaseHeaders: true,
  };
}
