import { Counter, Gauge, Histogram, Registry } from "prom-client";
import type { Verdict } from "../http/respond.js";
import type { ResolvedPolicy } from "../policy/types.js";

/**
 * One labelled child of the decisions counter and the decisions not yet added to it: a request
 * adds one to `pending`, a scrape hands the sum to prom-client (see DecisionMetrics).
 */
interface DecisionLeaf {
  readonly child: { inc(value: number): void };
  pending: number;
}

type ChildTree = Map<string, Map<string, Map<string, Map<string, DecisionLeaf>>>>;

interface DecisionLabels {
  readonly rule: string;
  readonly tier: string;
  readonly reason: string;
  readonly action: string;
  readonly leaf: DecisionLeaf;
}

function branch<Value>(map: Map<string, Map<string, Value>>, key: string): Map<string, Value> {
  let found = map.get(key);
  if (found === undefined) {
    found = new Map();
    map.set(key, found);
  }
  return found;
}

/** What a decision's metrics read of its verdict (the rate limit service records no more). */
export type RecordedDecision = Pick<
  Verdict,
  "rule" | "tier" | "reason" | "action" | "durationMs" | "shadowed"
>;

/** Label for decisions that no rule decided (allowlisted, no rule matched). */
const NO_RULE = "none";

export interface DecisionMetricsOptions {
  /** Where the metrics are registered (default: a registry of their own). */
  readonly registry?: Registry;
  /** Read at each scrape: store round trips the limiter's block cache saved. */
  readonly blockCacheHits?: () => number;
  /** Read at each scrape: the operators' overrides in force that the limiter holds. */
  readonly overridesActive?: () => number;
}

/**
 * The limiter's decisions as Prometheus metrics (prom-client): decisions by action, reason,
 * tier, deciding rule and the rule's path prefix; what shadow rules would have refused, by rule
 * (a decision a shadow rule would have refused is still admitted, `within-limit`: its own
 * counter, not a reason, keeps the decisions' labels meaning what they did); decision time;
 * store failures, failed-open, failed-closed and failed-local (counted in this process) counts. Label values come only from
 * the policy (rule ids and their path prefixes) and from fixed enums, never from the request,
 * so cardinality is bounded by the policy's size. The gateway and `edgelimit/node` share it.
 */
export class DecisionMetrics {
  readonly registry: Registry;
  readonly #decisions: Counter<"action" | "reason" | "tier" | "rule" | "path">;
  readonly #latency: Histogram;
  readonly #storeErrors: Counter;
  readonly #failedOpen: Counter;
  readonly #failedClosed: Counter;
  readonly #failedLocal: Counter;
  readonly #shadowRefusals: Counter<"rule" | "path">;
  /** Rule id -> the path label its decisions carry. */
  #rulePaths = new Map<string, string>();
  /**
   * Labelled children of the decisions counter, by rule, tier, reason and action: nested maps of
   * the verdict's own strings (their hashes are cached), not a key concatenated per request.
   */
  #decisionChildren: ChildTree = new Map();
  /** The previous decision's labels and child: steady traffic repeats them, no lookup then. */
  #last: DecisionLabels | undefined;
  /** Children of the shadow refusals counter by rule, counted as the decisions' are. */
  #shadowChildren = new Map<string, DecisionLeaf>();

  constructor(policy: ResolvedPolicy, options: DecisionMetricsOptions = {}) {
    this.registry = options.registry ?? new Registry();
    const registers = [this.registry];
    const flush = (): void => this.#flush();
    this.#decisions = new Counter({
      name: "edgelimit_decisions_total",
      help: "Rate-limit decisions by action, reason, tier, deciding rule and the rule's path prefix.",
      labelNames: ["action", "reason", "tier", "rule", "path"],
      registers,
      // Decisions are counted in the label tree's leaves and handed over at each scrape.
      collect: flush,
    });
    this.#shadowRefusals = new Counter({
      name: "edgelimit_shadow_refusals_total",
      help: "Decisions a shadow rule (rls: a shadow_mode descriptor, or any limit under SHADOW_MODE) would have refused had it been enforced; they were admitted. By rule and the rule's path prefix.",
      labelNames: ["rule", "path"],
      registers,
      collect: flush,
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
    this.#failedLocal = new Counter({
      name: "edgelimit_failed_local_total",
      help: "Decisions counted in this process because the store failed on a failMode: local rule (admitted or refused: see edgelimit_decisions_total).",
      registers,
    });
    const blockCacheHits = options.blockCacheHits;
    if (blockCacheHits !== undefined) {
      new Gauge({
        name: "edgelimit_block_cache_hits",
        help: "Store round trips saved by the local block cache since start.",
        registers,
        collect() {
          this.set(blockCacheHits());
        },
      });
    }
    const overridesActive = options.overridesActive;
    if (overridesActive !== undefined) {
      new Gauge({
        name: "edgelimit_overrides_active",
        help: "Operators' overrides in force (held and not expired) in this process's snapshot of the store's.",
        registers,
        collect() {
          this.set(overridesActive());
        },
      });
    }
    this.usePolicy(policy);
  }

  /** After a reload: decisions of the new policy's rules carry its path prefixes. */
  usePolicy(policy: ResolvedPolicy): void {
    const rulePaths = new Map<string, string>();
    for (const rule of policy.rules) rulePaths.set(rule.id, rule.pathPrefix ?? "*");
    this.#rulePaths = rulePaths;
    // A rule's path may change with the policy: children are looked up afresh, once the
    // decisions counted under the old ones are handed over.
    this.#flush();
    this.#decisionChildren = new Map();
    this.#shadowChildren = new Map();
    this.#last = undefined;
  }

  recordDecision(verdict: RecordedDecision): void {
    const rule = verdict.rule ?? NO_RULE;
    const last = this.#last;
    let leaf: DecisionLeaf;
    if (
      last !== undefined &&
      last.rule === rule &&
      last.tier === verdict.tier &&
      last.reason === verdict.reason &&
      last.action === verdict.action
    ) {
      leaf = last.leaf;
    } else {
      leaf = this.#decisionLeaf(rule, verdict);
      this.#last = {
        rule,
        tier: verdict.tier,
        reason: verdict.reason,
        action: verdict.action,
        leaf,
      };
    }
    leaf.pending++;
    for (const shadowRule of verdict.shadowed) this.#shadowLeaf(shadowRule).pending++;
    this.#latency.observe(verdict.durationMs / 1000);
    if (verdict.reason === "store-failed-open") {
      this.#storeErrors.inc();
      this.#failedOpen.inc();
    } else if (verdict.reason === "store-failed-closed") {
      this.#storeErrors.inc();
      this.#failedClosed.inc();
    } else if (verdict.reason === "store-failed-local") {
      this.#storeErrors.inc();
      this.#failedLocal.inc();
    }
  }

  #decisionLeaf(rule: string, verdict: RecordedDecision): DecisionLeaf {
    // prom-client hashes a label object on every `inc`; the labelled child is looked up once
    // per (action, reason, tier, rule) instead. Bounded: label values come from enums and the
    // policy, and the tree is rebuilt with each policy.
    const byTier = branch(this.#decisionChildren, rule);
    const byReason = branch(byTier, verdict.tier);
    const byAction = branch(byReason, verdict.reason);
    let leaf = byAction.get(verdict.action);
    if (leaf === undefined) {
      const child = this.#decisions.labels({
        action: verdict.action,
        reason: verdict.reason,
        tier: verdict.tier,
        rule,
        path: this.#rulePaths.get(rule) ?? "-",
      });
      leaf = { child, pending: 0 };
      byAction.set(verdict.action, leaf);
    }
    return leaf;
  }

  #shadowLeaf(rule: string): DecisionLeaf {
    // Bounded as the decisions' children are: rule ids come from the policy or configuration.
    let leaf = this.#shadowChildren.get(rule);
    if (leaf === undefined) {
      const child = this.#shadowRefusals.labels({ rule, path: this.#rulePaths.get(rule) ?? "-" });
      leaf = { child, pending: 0 };
      this.#shadowChildren.set(rule, leaf);
    }
    return leaf;
  }

  /** Hands the counts since the last scrape to prom-client's counters. */
  #flush(): void {
    for (const leaf of this.#shadowChildren.values()) {
      if (leaf.pending === 0) continue;
      leaf.child.inc(leaf.pending);
      leaf.pending = 0;
    }
    for (const byTier of this.#decisionChildren.values()) {
      for (const byReason of byTier.values()) {
        for (const byAction of byReason.values()) {
          for (const leaf of byAction.values()) {
            if (leaf.pending === 0) continue;
            leaf.child.inc(leaf.pending);
            leaf.pending = 0;
          }
        }
      }
    }
  }

  /** The Prometheus text exposition of every metric in the registry. */
  text(): Promise<string> {
    return this.registry.metrics();
  }

  get contentType(): string {
    return this.registry.contentType;
  }
}
