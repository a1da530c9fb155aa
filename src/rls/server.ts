/**
 * `edgelimit rls` as a library: the rate limit service (service.ts) behind its gRPC and HTTP
 * listeners, and the admin listener (metrics, health, the dashboard) on loopback, which is
 * never one of the public ports.
 */
import type { Server } from "node:http";
import type { AddressInfo } from "node:net";
import { type Logger, pino } from "pino";
import { formatWindow } from "../core/duration.js";
import type { EngineCompanions } from "../core/engine.js";
import type { ResolvedPolicy } from "../core/model.js";
import type { ChallengeHandler, Store } from "../core/types.js";
import { drainAndClose } from "../node-http/drain.js";
import { urlHost } from "../node-http/listen.js";
import { type AdminSource, startAdmin } from "../ops/admin.js";
import { DecisionBoard } from "../ops/decision-board.js";
import { OverrideBoard } from "../ops/override-board.js";
import { type PolicySummary, summarize } from "../ops/policy-summary.js";
import type { GatewaySnapshot } from "../ops/snapshot.js";
import { type StoreHealth, StoreHealthTracker } from "../ops/store-health.js";
import type { DecisionRecord } from "./answer.js";
import type { RlsConfig } from "./config.js";
import type { ConfigDecideOptions } from "./config-decide.js";
import { type GrpcListener, startGrpc } from "./grpc.js";
import { type HttpListener, startHttp } from "./http.js";
import { SERVING_STATUS } from "./messages.js";
import { RlsMetrics } from "./metrics.js";
import type { RequestLimits } from "./request-limits.js";
import { RateLimitService } from "./service.js";

export interface RlsServerOptions {
  readonly store: Store;
  /** envoyproxy/ratelimit's configuration (`--config`); a call of another domain goes to the policy. */
  readonly config?: RlsConfig | undefined;
  /** An edgelimit policy (`--policy`), for forward-auth and the domains the configuration lacks. */
  readonly policy?: ResolvedPolicy | undefined;
  readonly challenge?: ChallengeHandler | undefined;
  readonly companions?: EngineCompanions | undefined;
  readonly globalShadow?: boolean;
  readonly limitHeaders?: ConfigDecideOptions["limitHeaders"];
  /** gRPC listener (default 8081; 0 picks a free port; false: none). */
  readonly grpcPort?: number | false;
  readonly grpcHost?: string;
  /** HTTP listener (default 8080; 0 picks a free port). */
  readonly httpPort?: number;
  readonly httpHost?: string;
  /** Admin listener (default 9090 on 127.0.0.1; 0 picks a free port; false: none). */
  readonly adminPort?: number | false;
  readonly adminHost?: string;
  readonly env?: Readonly<Record<string, string | undefined>>;
  readonly readFile?: (path: string) => string;
  readonly clock?: () => number;
  readonly logger?: Logger;
  /** Shown on the dashboard: what the store is (`memory`, `redis://...` without credentials). */
  readonly storeLabel?: string;
  /** What one `ShouldRateLimit` call may hold (request-limits.ts has the defaults). */
  readonly requestLimits?: Partial<RequestLimits> | undefined;
}

export interface RlsAddresses {
  readonly grpcPort: number | undefined;
  readonly httpPort: number;
  readonly adminUrl: string | undefined;
}

export class RlsServer implements AdminSource {
  readonly service: RateLimitService;
  readonly metrics: RlsMetrics;
  readonly logger: Logger;
  readonly #options: RlsServerOptions;
  readonly #clock: () => number;
  readonly #storeHealth: StoreHealthTracker;
  readonly #board = new DecisionBoard({});
  /** Its policy's limiter counts through the service's step, which holds the store's overrides. */
  readonly #overrides = new OverrideBoard(() => this.service.limiter?.heldOverrides);
  readonly #startedAt: number;
  #loadedAt: number;
  #challenge: ChallengeHandler | undefined;
  #grpc: GrpcListener | undefined;
  #http: HttpListener | undefined;
  #admin: Server | undefined;
  #stopping = false;
  #closing: Promise<void> | undefined;
  /**
   * What `/check` refused to believe, each logged once: a misconfigured proxy would otherwise
   * log every request. Bounded, since the texts name a known proxy and headers, never a value.
   */
  readonly #checkProblems = new Set<string>();

  constructor(options: RlsServerOptions) {
    this.#options = options;
    this.#clock = options.clock ?? Date.now;
    this.logger = options.logger ?? pino({ base: undefined });
    this.#storeHealth = new StoreHealthTracker(options.store.name, this.logger, this.#clock, {
      status: () => options.store.traits?.status?.(),
      local: () => this.service.localCounting,
    });
    this.#challenge = options.challenge;
    this.service = new RateLimitService({
      store: options.store,
      config: options.config,
      policy: options.policy,
      companions: { ...options.companions, passes: options.challenge?.passes },
      globalShadow: options.globalShadow,
      limitHeaders: options.limitHeaders,
      env: options.env,
      readFile: options.readFile,
      clock: this.#clock,
      onDecision: (record) => this.#record(record),
      onStoreError: (error) => this.#storeHealth.failed(error),
      requestLimits: options.requestLimits,
    });
    // The overrides gauge where the policy's rules read them (a `--policy` on a store that
    // keeps them): a 0 elsewhere would read as "none set".
    this.metrics = new RlsMetrics(
      this.service.basePolicy,
      () => this.service.blockCacheHits,
      this.service.limiter?.heldOverrides === undefined
        ? undefined
        : () => this.#overrides.active(this.#clock()),
    );
    this.#startedAt = this.#clock();
    this.#loadedAt = this.#startedAt;
  }

  get inFlight(): number {
    return this.#http?.inFlight ?? 0;
  }

  storeHealth(): StoreHealth {
    return this.#storeHealth.health();
  }

  async start(): Promise<RlsAddresses> {
    const options = this.#options;
    try {
      const grpcPort = options.grpcPort ?? 8081;
      if (grpcPort !== false) {
        this.#grpc = await startGrpc(
          {
            shouldRateLimit: (request, peer) => this.service.shouldRateLimit(request, peer),
            health: () => (this.#stopping ? SERVING_STATUS.NOT_SERVING : SERVING_STATUS.SERVING),
            maxDescriptors: this.service.requestLimits.maxDescriptors,
            onCall: (method, code) =>
              this.metrics.recordCall(method === "Check" ? "grpc_health" : "grpc", code),
          },
          options.grpcHost ?? "0.0.0.0",
          grpcPort,
        );
      }
      this.#http = await startHttp(
        {
          shouldRateLimit: (request, peer) => this.service.shouldRateLimit(request, peer),
          check: (request) => this.service.check(request),
          healthy: () => !this.#stopping,
          challenge: () => {
            const limiter = this.service.limiter;
            const handler = this.#challenge;
            return handler === undefined || limiter === undefined
              ? undefined
              : { handler, limiter };
          },
          onRequest: (endpoint, status) => this.metrics.recordCall(endpoint, status),
          onError: (error) => this.logger.error({ msg: "request failed", err: error }),
          onCheckRefused: (problem) => {
            if (this.#checkProblems.has(problem)) return;
            this.#checkProblems.add(problem);
            this.logger.warn({
              msg: "forward-auth refused (logged once)",
              problem: problem.trim(),
            });
          },
        },
        options.httpHost ?? "0.0.0.0",
        options.httpPort ?? 8080,
      );
      const adminPort = options.adminPort ?? 9090;
      let adminUrl: string | undefined;
      if (adminPort !== false) {
        const adminHost = options.adminHost ?? "127.0.0.1";
        this.#admin = await startAdmin(this, adminPort, adminHost);
        const bound = (this.#admin.address() as AddressInfo).port;
        adminUrl = `http://${urlHost(adminHost)}:${bound}/`;
      }
      return { grpcPort: this.#grpc?.port, httpPort: this.#http.port, adminUrl };
    } catch (error) {
      await this.close();
      throw error;
    }
  }

  /** Swaps the configuration; counters are kept. */
  useConfig(config: RlsConfig): void {
    this.service.useConfig(config);
    this.metrics.recordReload("config", "applied");
    this.#loadedAt = this.#clock();
  }

  /** Swaps the policy and what was built from it; counters are kept. Throws if it cannot. */
  usePolicy(
    policy: ResolvedPolicy,
    companions: EngineCompanions & { readonly challenge?: ChallengeHandler | undefined },
  ): void {
    try {
      this.service.usePolicy(policy, { ...companions, passes: companions.challenge?.passes });
    } catch (error) {
      this.metrics.recordReload("policy", "refused");
      throw error;
    }
    this.#challenge = companions.challenge;
    this.metrics.usePolicy(policy);
    this.metrics.recordReload("policy", "applied");
    this.#loadedAt = this.#clock();
  }

  /**
   * Health checks fail first (so that the proxies stop sending), then the listeners stop and
   * the calls in flight finish (at most `graceMs`). Safe to call twice.
   */
  close(graceMs = 10_000): Promise<void> {
    this.#closing ??= this.#close(graceMs);
    return this.#closing;
  }

  async #close(graceMs: number): Promise<void> {
    this.#stopping = true;
    await Promise.all([this.#grpc?.close(graceMs), this.#http?.close(graceMs)]);
    this.service.close();
    if (this.#admin !== undefined) await drainAndClose(this.#admin, undefined, 0);
  }

  snapshot(): GatewaySnapshot {
    const now = this.#clock();
    const grpc = this.#grpc === undefined ? "" : `gRPC :${this.#grpc.port}, `;
    return {
      now,
      startedAt: this.#startedAt,
      policyLoadedAt: this.#loadedAt,
      limiting: true,
      upstream: `rate limit service (${grpc}HTTP :${this.#http?.port ?? "-"})`,
      store: this.#options.storeLabel ?? this.#options.store.name,
      inFlight: this.inFlight,
      ...this.#board.figures(now),
      blockCacheHits: this.service.blockCacheHits,
      lists: [],
      policy: this.#summary(),
      storeHealth: this.#storeHealth.health(),
      overrides: this.#overrides.figures(now),
    };
  }

  #record(record: DecisionRecord): void {
    this.#board.record(record, this.#clock());
    this.metrics.recordDecision(record);
  }

  /** The policy's rules, then the configuration's descriptors, as the dashboard lists rules. */
  #summary(): PolicySummary {
    const base = summarize(this.service.basePolicy);
    const config = this.service.config;
    if (config === undefined) return base;
    const descriptors = config.limits.flatMap((limit) =>
      limit.rules.map((rule) => ({
        id: rule.id,
        tiers: ["descriptor"],
        plans: undefined,
        path: "*",
        methods: undefined,
        key: limit.fullKey,
        limit: rule.limit,
        window: formatWindow(rule.window),
        algorithm: rule.algorithm,
        action: limit.quotaMode ? "quota" : "block",
        shadow: limit.shadowMode,
        failMode: rule.failMode,
      })),
    );
    return { ...base, rules: [...base.rules, ...descriptors] };
  }
}
