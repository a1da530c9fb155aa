import {
  createLimiter,
  type Limiter,
  type MemoryStore,
  memoryStore,
  type RequestDescription,
  type ResolvedPolicy,
  type Verdict,
} from "../index.js";
import type { LogRecord } from "./record.js";
import { Tally } from "./tally.js";

/** Headers that carry `--user-field` and `--plan-field` to the limiter (never a client's). */
const USER_HEADER = "x-edgelimit-replay-user";
const PLAN_HEADER = "x-edgelimit-replay-plan";
const PLACEHOLDER_SECRET = "edgelimit-replay-placeholder-secret";

/**
 * Replay never holds a real token, so it never needs the policy's secrets: every `{ env }` and
 * `{ file }` secret reads as a placeholder, and replay runs with none of them set.
 */
const PLACEHOLDER_ENV: Readonly<Record<string, string>> = new Proxy(
  {},
  { get: (_target, name) => (typeof name === "string" ? PLACEHOLDER_SECRET : undefined) },
);

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

/** One policy driven over the log's time: the real limiter and memory store, a virtual clock. */
export class PolicyReplay {
  readonly file: string;
  readonly policy: ResolvedPolicy;
  readonly tally: Tally;
  readonly store: MemoryStore;
  readonly #limiter: Limiter;
  #now = 0;

  constructor(file: string, policy: ResolvedPolicy, withUsers: boolean) {
    this.file = file;
    this.policy = replayPolicy(policy, withUsers);
    this.store = memoryStore();
    this.#limiter = createLimiter({
      policy: this.policy,
      store: this.store,
      clock: () => this.#now,
      env: PLACEHOLDER_ENV,
      readFile: () => PLACEHOLDER_SECRET,
      blockCache: false,
    });
    this.tally = new Tally(this.policy.rules);
  }

  /** Decides one record; synchronous unless the limiter has to wait (it does not here). */
  replay(record: LogRecord): undefined | Promise<void> {
    this.#now = record.time;
    const verdict = this.#limiter.decide(requestOf(record));
    if (verdict instanceof Promise) {
      return verdict.then((settled) => {
        this.tally.add(record, settled);
      });
    }
    this.tally.add(record, verdict);
    return undefined;
  }

  /** The verdict for one record, for tests that look at a single decision. */
  decide(record: LogRecord): Verdict | Promise<Verdict> {
    this.#now = record.time;
    return this.#limiter.decide(requestOf(record));
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
