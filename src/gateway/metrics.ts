import { Counter, Gauge, Histogram, Registry } from "prom-client";
import type { Verdict } from "../core/types.js";
import type { ListStats } from "../lists/refreshing.js";
import type { ResolvedPolicy } from "../policy/types.js";

export type { ListStats };

export interface MetricsSources {
  blockCacheHits(): number;
  listStats(): readonly ListStats[];
}

interface DecisionLabels {
  readonly rule: string;
  readonly tier: string;
  readonly reason: string;
  readonly action: string;
  readonly child: { inc(): void };
}

type ChildTree = Map<string, Map<string, Map<string, Map<string, { inc(): void }>>>>;

function branch<Value>(map: Map<string, Map<string, Value>>, key: string): Map<string, Value> {
  let found = map.get(key);
  if (found === undefined) {
    found = new Map();
    map.set(key, found);
  }
  return found;
}

/** Label for decisions that no rule decided (allowlisted, no rule matched). */
const NO_RULE = "none";

/**
 * The gateway's Prometheus metrics, in a registry of its own (two gateways in one process never
 * share counters). Label values come only from the policy (rule ids and their path prefixes) and
 * from fixed enums, never from the request, so cardinality is bounded by the policy's size.
 */
export class GatewayMetrics {
  readonly registry = new Registry();
  readonly #decisions: Counter<"action" | "reason" | "tier" | "rule" | "path">;
  readonly #latency: Histogram;
  readonly #storeErrors: Counter;
  readonly #failedOpen: Counter;
  readonly #failedClosed: Counter;
  readonly #upstreamErrors: Counter<"kind">;
  readonly #reloads: Counter<"result">;
  /** Rule id -> the path label its decisions carry. */
  #rulePaths = new Map<string, string>();
  /**
   * Labelled children of the decisions counter, by rule, tier, reason and action: nested maps of
   * the verdict's own strings (their hashes are cached), not a key concatenated per request.
   */
  #decisionChildren: ChildTree = new Map();
  /** The previous decision's labels and child: steady traffic repeats them, no lookup then. */
  #last: DecisionLabels | undefined;

  constructor(policy: ResolvedPolicy, sources: MetricsSources) {
    const registers = [this.registry];
    this.#decisions = new Counter({
      name: "edgelimit_decisions_total",
      help: "Rate-limit decisions by action, reason, tier, deciding rule and the rule's path prefix.",
      labelNames: ["action", "reason", "tier", "rule", "path"],
      registers,
    });
    this.#latency = new Histogram({
      name: "edgelimit_decision_duration_seconds",
      help: "Time to reach a decision, store round trip included.",
      buckets: [
        0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
      ],
      registers,
    });
    this.#storeErrors = new Counter({
      name: "edgelimit_store_errors_total",
      help: "Decisions where the store failed or missed the time budget.",
      registers,
    });
    this.#failedOpen = new Counter({
      name: "edgelimit_failed_open_total",
      help: "Requests let through because the store failed on a fail-open rule.",
      registers,
    });
    this.#failedClosed = new Counter({
      name: "edgelimit_failed_closed_total",
      help: "Requests refused with 503 because the store failed on a fail-closed rule or path.",
      registers,
    });
    this.#upstreamErrors = new Counter({
      name: "edgelimit_upstream_errors_total",
      help: "Requests the upstream could not answer (kind: connect, timeout, reset).",
      labelNames: ["kind"],
      registers,
    });
    this.#reloads = new Counter({
      name: "edgelimit_policy_reloads_total",
      help: "Policy reloads by result (applied, refused).",
      labelNames: ["result"],
      registers,
    });
    new Gauge({
      name: "edgelimit_block_cache_hits",
      help: "Store round trips saved by the local block cache since start.",
      registers,
      collect() {
        this.set(sources.blockCacheHits());
      },
    });
    new Gauge({
      name: "edgelimit_list_size",
      help: "Entries in each refreshing allow/deny list.",
      labelNames: ["name", "kind"],
      registers,
      collect() {
        this.reset();
        for (const list of sources.listStats())
          this.set({ name: list.name, kind: list.kind }, list.size);
      },
    });
    new Gauge({
      name: "edgelimit_list_refresh_errors",
      help: "Failed refreshes of each allow/deny list since start (the last good copy is kept).",
      labelNames: ["name", "kind"],
      registers,
      collect() {
        this.reset();
        for (const list of sources.listStats()) {
          this.set({ name: list.name, kind: list.kind }, list.errors);
        }
      },
    });
    this.usePolicy(policy);
  }

  usePolicy(policy: ResolvedPolicy): void {
    const rulePaths = new Map<string, string>();
    for (const rule of policy.rules) rulePaths.set(rule.id, rule.pathPrefix ?? "*");
    this.#rulePaths = rulePaths;
    // A rule's path may change with the policy: children are looked up afresh.
    this.#decisionChildren = new Map();
    this.#last = undefined;
  }

  recordDecision(verdict: Verdict): void {
    const rule = verdict.rule ?? NO_RULE;
    const last = this.#last;
    let child: { inc(): void };
    if (
      last !== undefined &&
      last.rule === rule &&
      last.tier === verdict.tier &&
      last.reason === verdict.reason &&
      last.action === verdict.action
    ) {
      child = last.child;
    } else {
      child = this.#decisionChild(rule, verdict);
      this.#last = {
        rule,
        tier: verdict.tier,
        reason: verdict.reason,
        action: verdict.action,
        child,
      };
    }
    child.inc();
    this.#latency.observe(verdict.durationMs / 1000);
    if (verdict.reason === "store-failed-open") {
      this.#storeErrors.inc();
      this.#failedOpen.inc();
    } else if (verdict.reason === "store-failed-closed") {
      this.#storeErrors.inc();
      this.#failedClosed.inc();
    }
  }

  #decisionChild(rule: string, verdict: Verdict): { inc(): void } {
    // prom-client hashes a label object on every `inc`; the labelled child is looked up once
    // per (action, reason, tier, rule) instead. Bounded: label values come from enums and the
    // policy, and the tree is rebuilt with each policy.
    const byTier = branch(this.#decisionChildren, rule);
    const byReason = branch(byTier, verdict.tier);
    const byAction = branch(byReason, verdict.reason);
    let child = byAction.get(verdict.action);
    if (child === undefined) {
      child = this.#decisions.labels({
        action: verdict.action,
        reason: verdict.reason,
        tier: verdict.tier,
        rule,
        path: this.#rulePaths.get(rule) ?? "-",
      });
      byAction.set(verdict.action, child);
    }
    return child;
  }

  recordUpstreamError(kind: "connect" | "timeout" | "reset"): void {
    this.#upstreamErrors.inc({ kind });
  }

  recordReload(result: "applied" | "refused"): void {
    this.#reloads.inc({ result });
  }

  text(): Promise<string> {
    return this.registry.metrics();
  }

  get contentType(): string {
    return this.registry.contentType;
  }
}
