import { Counter } from "prom-client";
import type { ResolvedPolicy } from "../core/model.js";
import { DecisionMetrics } from "../metrics/prometheus.js";

/**
 * The rate limit service's Prometheus metrics: the decisions (see DecisionMetrics; a configured
 * descriptor's rule is its place in the configuration, `edge.remote_address`), the calls by
 * protocol and outcome, and reloads. Label values come from the configuration, the policy and
 * fixed enums only.
 */
export class RlsMetrics extends DecisionMetrics {
  readonly #calls: Counter<"api" | "code">;
  /**
   * The calls counter's children by API and outcome, each with the calls not yet added to it: a
   * call adds one to `pending`, a scrape hands the sums to prom-client (whose child `inc` hashes
   * the labels again on every call). Bounded: both labels come from fixed sets.
   */
  readonly #callChildren = new Map<string, Map<string | number, CallLeaf>>();
  readonly #reloads: Counter<"source" | "result">;

  /** `overridesActive`: where the policy reads overrides (the gauge is absent otherwise). */
  constructor(
    policy: ResolvedPolicy,
    blockCacheHits: () => number,
    overridesActive?: () => number,
  ) {
    super(policy, { blockCacheHits, overridesActive });
    const registers = [this.registry];
    this.#calls = new Counter({
      name: "edgelimit_rls_calls_total",
      help: "Calls to the rate limit service by API (grpc, grpc_health, json, check, healthcheck) and outcome (gRPC status or HTTP status).",
      labelNames: ["api", "code"],
      registers,
      collect: () => this.#flushCalls(),
    });
    this.#reloads = new Counter({
      name: "edgelimit_rls_reloads_total",
      help: "Reloads of the configuration (source config) or policy (source policy) by result (applied, refused).",
      labelNames: ["source", "result"],
      registers,
    });
  }

  recordCall(api: string, code: string | number): void {
    let byCode = this.#callChildren.get(api);
    if (byCode === undefined) {
      byCode = new Map();
      this.#callChildren.set(api, byCode);
    }
    let leaf = byCode.get(code);
    if (leaf === undefined) {
      leaf = { child: this.#calls.labels({ api, code: String(code) }), pending: 0 };
      byCode.set(code, leaf);
    }
    leaf.pending++;
  }

  recordReload(source: "config" | "policy", result: "applied" | "refused"): void {
    this.#reloads.inc({ source, result });
  }

  #flushCalls(): void {
    for (const byCode of this.#callChildren.values()) {
      for (const leaf of byCode.values()) {
        if (leaf.pending === 0) continue;
        leaf.child.inc(leaf.pending);
        leaf.pending = 0;
      }
    }
  }
}

/** One labelled child of the calls counter and the calls not yet added to it. */
interface CallLeaf {
  readonly child: { inc(value: number): void };
  pending: number;
}
