import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { type Logger, pino } from "pino";
import { type NodeGuard, type NodeGuardOptions, nodeGuard } from "../adapters/node-guard.js";
import type { ChallengeHandler, Store } from "../core/types.js";
import { checkGuardOptions } from "../http/guard.js";
import type { Verdict } from "../http/respond.js";
import { type AddressList, createLimiter, type Limiter } from "../limiter.js";
import { drainAndClose, RequestsInFlight } from "../node-http/drain.js";
import { listen, urlHost } from "../node-http/listen.js";
import { writeWebResponse } from "../node-http/web.js";
import { startAdmin } from "../ops/admin.js";
import { DecisionBoard } from "../ops/decision-board.js";
import { OverrideBoard } from "../ops/override-board.js";
import { summarize } from "../ops/policy-summary.js";
import type { GatewaySnapshot } from "../ops/snapshot.js";
import { type StoreHealth, StoreHealthTracker } from "../ops/store-health.js";
import type { ResolvedPolicy } from "../policy/types.js";
import { DecisionLog } from "./decision-log.js";
import { GatewayMetrics, type ListStats } from "./metrics.js";
import { UpstreamProxy } from "./proxy.js";

export type { GatewaySnapshot } from "../ops/snapshot.js";

export type { StoreHealth } from "../ops/store-health.js";

/** Refreshing allow/deny lists, as `createLists` in src/lists builds them. */
export interface GatewayLists {
  readonly allow: readonly AddressList[];
  readonly deny: readonly AddressList[];
  stats(): readonly ListStats[];
  close(): void;
}

/**
 * `skip`, `cost`, `user` and `onRefused` are the Node middleware's (`edgelimit/node`), for a
 * gateway built in code; `edgelimit serve` sets none of them.
 */
export interface GatewayOptions extends NodeGuardOptions {
  readonly policy: ResolvedPolicy;
  readonly store: Store;
  /** The origin every allowed request is forwarded to: `http://127.0.0.1:3000`. */
  readonly upstream: string;
  /** Public listener (default 8080 on 0.0.0.0; 0 picks a free port). */
  readonly port?: number;
  readonly host?: string;
  /** Admin listener (default 9090 on 127.0.0.1; 0 picks a free port; false: none). */
  readonly adminPort?: number | false;
  readonly adminHost?: string;
  /** false: forward everything without asking the limiter (the benchmark's baseline). */
  readonly limit?: boolean;
  readonly challenge?: ChallengeHandler;
  readonly lists?: GatewayLists;
  /** Environment for the policy's `{ env: NAME }` secrets (default process.env). */
  readonly env?: Readonly<Record<string, string | undefined>>;
  readonly readFile?: (path: string) => string;
  readonly clock?: () => number;
  /** Decision log and operational messages (default: pino JSON lines on stdout). */
  readonly logger?: Logger;
  /** Share of allowed decisions written to the log (default 0.01; refusals are always logged). */
  readonly allowedLogSampleRate?: number;
  readonly upstreamTimeoutMs?: number;
  readonly upstreamConnections?: number;
  /** How long SIGTERM waits for in-flight requests before cutting them (default 10 s). */
  readonly drainTimeoutMs?: number;
  /** Slots of the top-offenders sketch (default 100). */
  readonly topKeysCapacity?: number;
  /** The top offenders cover the last one to two of these periods (default 5 minutes). */
  readonly topKeysPeriodMs?: number;
  /** Shown on the dashboard: what the store is (`memory`, `redis://...` without credentials). */
  readonly storeLabel?: string;
}

/** Everything the dashboard shows, as JSON. */

const NO_HEADERS: Readonly<Record<string, string>> = Object.freeze({});
/** The gateway's name in the messages of options it refuses. */
const GUARD_NAME = "createGateway";

/**
 * `edgelimit serve` as a library: a reverse proxy that asks the limiter about every request,
 * answers refusals itself and streams allowed requests to the upstream; plus an admin listener
 * (metrics, health, dashboard) that is never reachable through the public port.
 */
export class Gateway {
  readonly #options: GatewayOptions;
  readonly #limiter: Limiter;
  readonly #limiting: boolean;
  readonly #proxy: UpstreamProxy;
  readonly #clock: () => number;
  readonly #storeHealth: StoreHealthTracker;
  readonly #logger: Logger;
  readonly #decisionLog: DecisionLog;
  readonly metrics: GatewayMetrics;
  readonly #board: DecisionBoard;
  readonly #overrideBoard: OverrideBoard;
  readonly #startedAt: number;
  #policyLoadedAt: number;
  /** Built from the policy (its challenge), so replaced with it on reload. */
  #guard: NodeGuard;
  #lists: GatewayLists | undefined;
  #server: Server | undefined;
  #admin: Server | undefined;
  readonly #requests = new RequestsInFlight();
  #closing: Promise<void> | undefined;

  constructor(options: GatewayOptions) {
    this.#options = options;
    this.#clock = options.clock ?? Date.now;
    this.#limiting = options.limit !== false;
    this.#logger = options.logger ?? pino({ base: undefined });
    this.#decisionLog = new DecisionLog(this.#logger, options.allowedLogSampleRate ?? 0.01);
    this.#storeHealth = new StoreHealthTracker(options.store.name, this.#logger, this.#clock, {
      status: () => options.store.traits?.status?.(),
      local: () => this.#limiter.localCounting,
    });
    this.#board = new DecisionBoard(options);
    this.#lists = options.lists;
    this.#limiter = createLimiter({
      policy: options.policy,
      store: options.store,
      clock: this.#clock,
      env: options.env,
      readFile: options.readFile,
      passes: options.challenge?.passes,
      allowlists: options.lists?.allow,
      denylists: options.lists?.deny,
      onStoreError: (error) => this.#storeHealth.failed(error),
    });
    this.#proxy = new UpstreamProxy(options.upstream, {
      timeoutMs: options.upstreamTimeoutMs,
      connections: options.upstreamConnections,
    });
    this.#guard = nodeGuard(GUARD_NAME, this.#limiter, options);
    const overrideBoard = new OverrideBoard(() => this.#limiter.heldOverrides);
    this.#overrideBoard = overrideBoard;
    this.metrics = new GatewayMetrics(options.policy, {
      blockCacheHits: () => this.#limiter.blockCacheHits,
      listStats: () => this.#lists?.stats() ?? [],
      // No gauge where the store keeps no overrides: a 0 there would read as "none set".
      overridesActive:
        this.#limiter.heldOverrides === undefined
          ? undefined
          : () => overrideBoard.active(this.#clock()),
    });
    this.#startedAt = this.#clock();
    this.#policyLoadedAt = this.#startedAt;
  }

  get policy(): ResolvedPolicy {
    return this.#limiter.policy;
  }

  /** The store as `/healthz` reports it (see StoreHealthTracker). */
  storeHealth(): StoreHealth {
    return this.#storeHealth.health();
  }

  get logger(): Logger {
    return this.#logger;
  }

  get inFlight(): number {
    return this.#requests.count;
  }

  /** The public port actually bound (useful with port 0). */
  get port(): number | undefined {
    return (this.#server?.address() as AddressInfo | null)?.port;
  }

  get adminPort(): number | undefined {
    return (this.#admin?.address() as AddressInfo | null)?.port;
  }

  async start(): Promise<{ url: string; adminUrl: string | undefined }> {
    const server = createServer({ keepAliveTimeout: 5_000 }, (req, res) => {
      void this.#handle(req, res);
    });
    this.#server = server;
    const host = this.#options.host ?? "0.0.0.0";
    await listen(server, this.#options.port ?? 8080, host);
    const adminPort = this.#options.adminPort ?? 9090;
    let adminUrl: string | undefined;
    if (adminPort !== false) {
      const adminHost = this.#options.adminHost ?? "127.0.0.1";
      try {
        this.#admin = await startAdmin(this, adminPort, adminHost);
      } catch (error) {
        server.close();
        throw error;
      }
      adminUrl = `http://${urlHost(adminHost)}:${this.adminPort}/`;
    }
    return { url: `http://${urlHost(host)}:${this.port}/`, adminUrl };
  }

  /**
   * Applies a new policy; counters live in the store and are kept. `companions` are what was
   * built from the new policy (its challenge handler and lists); given, they replace the old
   * ones, whose lists are closed. A policy that does not compile (a secret that is not set, for
   * example) throws, and everything running stays.
   */
  reload(
    policy: ResolvedPolicy,
    companions?: {
      readonly challenge: ChallengeHandler | undefined;
      readonly lists: GatewayLists | undefined;
    },
  ): void {
    try {
      checkGuardOptions(GUARD_NAME, policy, this.#options);
      this.#limiter.reload(
        policy,
        companions === undefined
          ? undefined
          : {
              passes: companions.challenge?.passes,
              allowlists: companions.lists?.allow,
              denylists: companions.lists?.deny,
            },
      );
    } catch (error) {
      this.metrics.recordReload("refused");
      throw error;
    }
    if (companions !== undefined) {
      const previousLists = this.#lists;
      this.#guard = nodeGuard(GUARD_NAME, this.#limiter, {
        ...this.#options,
        challenge: companions.challenge,
      });
      this.#lists = companions.lists;
      if (previousLists !== companions.lists) previousLists?.close();
    }
    this.metrics.usePolicy(policy);
    this.metrics.recordReload("applied");
    this.#policyLoadedAt = this.#clock();
  }

  snapshot(): GatewaySnapshot {
    const now = this.#clock();
    return {
      now,
      startedAt: this.#startedAt,
      policyLoadedAt: this.#policyLoadedAt,
      limiting: this.#limiting,
      upstream: this.#proxy.origin,
      store: this.#options.storeLabel ?? this.#options.store.name,
      inFlight: this.#requests.count,
      ...this.#board.figures(now),
      blockCacheHits: this.#limiter.blockCacheHits,
      lists: this.#lists?.stats() ?? [],
      policy: summarize(this.#limiter.policy),
      storeHealth: this.#storeHealth.health(),
      overrides: this.#overrideBoard.figures(now),
    };
  }

  /**
   * Stops accepting connections, waits for in-flight requests (at most `drainTimeoutMs`), then
   * closes the admin listener, the upstream pool and the lists. Safe to call twice.
   */
  close(): Promise<void> {
    this.#closing ??= this.#close();
    return this.#closing;
  }

  async #close(): Promise<void> {
    if (this.#server !== undefined) {
      await drainAndClose(this.#server, this.#requests, this.#options.drainTimeoutMs ?? 10_000);
    }
    if (this.#admin !== undefined) await drainAndClose(this.#admin, undefined, 0);
    await this.#proxy.close().catch(() => this.#proxy.destroy());
    this.#lists?.close();
  }

  async #handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    this.#requests.track(res);
    // A client that hangs up mid-upload must not crash the process.
    req.on("error", () => undefined);
    try {
      if (!this.#limiting) {
        const uncounted = this.#guard.uncounted();
        await this.#proxy.forward(req, res, uncounted, NO_HEADERS, this.#onUpstreamFailure);
        return;
      }
      // The guard answers synchronously for the memory store and cached identities: no
      // microtask turn between the request and its forwarding.
      const guarded = this.#guard.run(req, res);
      const action = guarded instanceof Promise ? await guarded : guarded;
      if (action.kind === "page") {
        await writeWebResponse(res, action.response);
        return;
      }
      if (action.verdict !== undefined) this.#record(action.verdict, req.method);
      switch (action.kind) {
        case "forward":
          await this.#proxy.forward(req, res, action, action.respond, this.#onUpstreamFailure);
          return;
        case "refuse": {
          const { verdict } = action;
          const body = verdict.body ?? "";
          res.writeHead(verdict.status, {
            ...verdict.headers,
            "content-length": String(Buffer.byteLength(body)),
          });
          res.end(body);
          return;
        }
        case "answered":
          return;
      }
    } catch (error) {
      this.#logger.error({ msg: "request failed", err: error });
      if (!res.headersSent) {
        const body = JSON.stringify({
          error: "internal_error",
          message: "The gateway failed to handle this request.",
        });
        res.writeHead(500, { "content-type": "application/json; charset=utf-8" });
        res.end(body);
      } else {
        res.destroy();
      }
    }
  }

  readonly #onUpstreamFailure = (kind: "connect" | "timeout" | "reset", error: unknown): void => {
    this.metrics.recordUpstreamError(kind);
    this.#logger.error({ msg: "upstream failed", kind, err: error });
  };

  #record(verdict: Verdict, method: string | undefined): void {
    this.#board.record(verdict, this.#clock());
    this.metrics.recordDecision(verdict);
    this.#decisionLog.record(verdict, method);
  }
}

export function createGateway(options: GatewayOptions): Gateway {
  return new Gateway(options);
}
