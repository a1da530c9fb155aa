import { Counter, Gauge } from "prom-client";
import type { ListStats } from "../lists/refreshing.js";
import { DecisionMetrics } from "../metrics/prometheus.js";
import type { ResolvedPolicy } from "../policy/types.js";

export type { ListStats };

export interface MetricsSources {
  blockCacheHits(): number;
  listStats(): readonly ListStats[];
  /** The overrides in force the limiter holds; absent where its store keeps none. */
  readonly overridesActive?: (() => number) | undefined;
}

/**
 * The gateway's Prometheus metrics, in a registry of its own (two gateways in one process never
 * share counters): the limiter's decisions (see DecisionMetrics), plus upstream failures, policy
 * reloads and the allow/deny lists.
 */
export class GatewayMetrics extends DecisionMetrics {
  readonly #upstreamErrors: Counter<"kind">;
  readonly #reloads: Counter<"result">;

  constructor(policy: ResolvedPolicy, sources: MetricsSources) {
    super(policy, {
      blockCacheHits: sources.blockCacheHits,
      overridesActive: sources.overridesActive,
    });
    const registers = [this.registry];
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
  }

  recordUpstreamError(kind: "connect" | "timeout" | "reset"): void {
    this.#upstreamErrors.inc({ kind });
  }

  recordReload(result: "applied" | "refused"): void {
    this.#reloads.inc({ result });
  }
}
