import type { Decision } from "../core/decision.js";
import type { ResolvedPolicy } from "../core/model.js";
import type { OverrideInput } from "../core/overrides.js";
import type { RequestDescription } from "../core/types.js";
import { checkedOverrides } from "../offline/overrides-file.js";
import { offlinePolicy } from "../offline/policy.js";
import { ReferenceEngine } from "../offline/reference.js";
import type { MemoryStore } from "../stores/memory.js";
import type { LogRecord } from "./record.js";
import { Tally } from "./tally.js";

/** Headers that carry `--user-field` and `--plan-field` to the limiter (never a client's). */
const USERS = { user: "x-edgelimit-replay-user", plan: "x-edgelimit-replay-plan" } as const;

/**
 * One policy driven over the log's time: the real decision engine and memory store on a
 * virtual clock (offline/reference.ts), with the policy as offline runs apply it
 * (offline/policy.ts): the log's client address is the peer, and with `--user-field` the user
 * comes from the log; without it every request is anonymous. Replay needs decisions, not HTTP
 * answers, so it runs the engine without the presenter.
 */
export class PolicyReplay {
  readonly file: string;
  readonly policy: ResolvedPolicy;
  readonly tally: Tally;
  readonly #reference: ReferenceEngine;

  /** `overrides`: read from `--overrides FILE` (`overridesFile`), checked here against `policy`. */
  constructor(
    file: string,
    policy: ResolvedPolicy,
    withUsers: boolean,
    overrides: readonly OverrideInput[] = [],
    overridesFile = "",
  ) {
    this.file = file;
    this.policy = offlinePolicy(policy, withUsers ? USERS : undefined);
    this.#reference = new ReferenceEngine(
      this.policy,
      checkedOverrides(overridesFile, overrides, this.policy),
    );
    this.tally = new Tally(this.policy.rules);
  }

  get store(): MemoryStore {
    return this.#reference.store;
  }

  /** Decides one record; synchronous unless the limiter has to wait (it does not here). */
  replay(record: LogRecord): undefined | Promise<void> {
    const decision = this.#reference.decide(requestOf(record), record.time);
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
    return this.#reference.decide(requestOf(record), record.time);
  }
}

function requestOf(record: LogRecord): RequestDescription {
  if (record.user === undefined) {
    return { ip: record.ip, method: record.method, path: record.path };
  }
  const headers: Record<string, string> = { [USERS.user]: record.user };
  if (record.plan !== undefined) headers[USERS.plan] = record.plan;
  return {
    ip: record.ip,
    method: record.method,
    path: record.path,
    headers,
    lowerCaseHeaders: true,
  };
}
