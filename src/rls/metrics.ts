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
   * The calls counter's children by API and outcome: prom-client hashes a label object on every
   * `inc`, a child is looked up once. Bounded: both labels come from fixed sets.
   */
  readonly #callChildren = new Map<string, Map<string | number, { inc(): void }>>();
  readonly #reloads: Counter<"source" | "result">;

  constructor(policy: ResolvedPolicy, blockCacheHits: () => number) {
    super(policy, { blockCacheHits });
    const registers = [this.registry];
    this.#calls = new Counter({
      name: "edgelimit_rls_calls_total",
      help: "Calls to the rate limit service by API (grpc, grpc_health, json, check, healthcheck) and outcome (gRPC status or HTTP status).",
      labelNames: ["api", "code"],
      registers,
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
    let child = byCode.get(code);
    if (child === undefined) {
      child = this.#calls.labels({ api, code: String(code) });
      byCode.set(code, child);
    }
    child.inc();
  }

  recordReload(source: "config" | "policy", result: "applied" | "refused"): void {
    this.#reloads.inc({ source, result });
  }
}
