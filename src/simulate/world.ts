/**
 * The network and the stores of one simulated run: round trips (with jitter and incidents)
 * from each region to each replica, the transport that carries the real `DynamoDbStore`'s calls
 * to the table model, and the store each instance of the deployment gets for each mode.
 */
import type { Scheduler } from "../core/deadline.js";
import type { ResolvedPolicy } from "../core/model.js";
import type { CounterSpec, CounterState, Store } from "../core/types.js";
import {
  DynamoDbError,
  DynamoDbHttpClient,
  type DynamoDbTransport,
} from "../stores/dynamodb/client.js";
import { DynamoDbStore } from "../stores/dynamodb/store.js";
import { MemoryStore } from "../stores/memory.js";
import { type OperationCost, TableModel } from "./dynamodb-model/model.js";
import type { EventLoop } from "./event-loop.js";
import type { Random } from "./random.js";
import type { Scenario } from "./scenario.js";
import { TwoWritesStore } from "./two-writes-store.js";

/** The counting modes a scenario compares (docs/accuracy.md, "The modes"). */
export type Mode = "two-writes" | "exact" | "hybrid" | "hybrid+holder" | "hybrid+allowance";

/** Whether `mode` counts hybrid rules by reservation (with region holders or without). */
export function isHybridMode(mode: Mode): boolean {
  return mode === "hybrid" || mode === "hybrid+holder" || mode === "hybrid+allowance";
}

const SIM_CREDENTIALS = { accessKeyId: "SIMULATED", secretAccessKey: "simulated" };

export class World {
  readonly loop: EventLoop;
  readonly scheduler: Scheduler;
  readonly clock: () => number;
  readonly model: TableModel | undefined;
  readonly #scenario: Scenario;
  readonly #random: Random;
  /** The Redis primary: the memory store's counting (the Redis Lua script runs the same algorithms). */
  readonly #redisPrimary = new MemoryStore();
  readonly #onOperation: (cost: OperationCost) => void;

  constructor(
    scenario: Scenario,
    loop: EventLoop,
    random: Random,
    onOperation: (cost: OperationCost) => void,
  ) {
    this.#scenario = scenario;
    this.loop = loop;
    this.scheduler = loop.scheduler;
    const start = Date.parse(scenario.start);
    this.clock = () => start + loop.now;
    this.#random = random;
    this.#onOperation = onOperation;
    const store = scenario.store;
    if (store.kind === "dynamodb") {
      const lag = store.replicationLagMs;
      this.model = new TableModel({
        tables: [
          { name: store.table, replicas: store.replicas },
          ...(store.lease === undefined
            ? []
            : [{ name: store.lease.table, replicas: [store.lease.region] }]),
          ...(store.lease?.holders === undefined
            ? []
            : [{ name: store.lease.holders, replicas: store.replicas, regional: true }]),
        ],
        lagMs: () => (lag.sigma === 0 ? lag.median : random.logNormal(lag.median, lag.sigma)),
        onOperation,
      });
      // Expired items leave the model once a simulated minute (see `retainAfterTtlMs`).
      const model = this.model;
      const sweep = (): void => {
        model.sweep(this.clock(), loop.now);
        loop.after(60_000, sweep);
        loop.quiet();
      };
      loop.after(60_000, sweep);
    }
  }

  /** The replica a region writes to: the nearest (the first listed on a tie). */
  nearestReplica(region: string): string {
    const store = this.#scenario.store;
    if (store.kind !== "dynamodb") return region;
    let best = store.replicas[0] as string;
    for (const replica of store.replicas) {
      if ((store.rttMs[region]?.[replica] ?? Infinity) < (store.rttMs[region]?.[best] ?? Infinity))
        best = replica;
    }
    return best;
  }

  /** The base round trip from `region` to `replica` (Redis: to the primary), ms. */
  baseRoundTrip(region: string, replica: string): number {
    const store = this.#scenario.store;
    if (store.kind === "dynamodb") return store.rttMs[region]?.[replica] ?? 0;
    if (store.kind === "redis") return store.rttMs[region] ?? 0;
    return 0;
  }

  /** One call's round trip: the base, jitter (exponential, its mean `jitterMs`) and incidents. */
  #roundTrip(region: string, replica: string): { ms: number; fails: boolean } {
    const store = this.#scenario.store;
    let ms = this.baseRoundTrip(region, replica);
    let fails = false;
    if (store.kind === "memory") return { ms, fails };
    if (store.jitterMs > 0) ms += this.#random.exponential(store.jitterMs);
    if (store.kind === "dynamodb") {
      const now = this.loop.now;
      for (const incident of store.incidents) {
        if (incident.replica !== replica || now < incident.from || now >= incident.to) continue;
        ms += incident.extraMs;
        if (incident.errorRate > 0 && this.#random.next() < incident.errorRate) fails = true;
      }
    }
    return { ms, fails };
  }

  /** The transport of a client in `region`: each call travels, runs in the model, travels back. */
  transportFor(region: string): DynamoDbTransport {
    const loop = this.loop;
    const model = this.model as TableModel;
    return {
      send: (replica, operation, input) =>
        new Promise((resolve, reject) => {
          const { ms, fails } = this.#roundTrip(region, replica);
          loop.after(ms / 2, () => {
            let answer: unknown;
            let error: unknown;
            if (fails) error = new DynamoDbError("InternalServerError", 500, "simulated incident");
            else {
              try {
                answer = model.execute(
                  replica,
                  operation,
                  input as Record<string, unknown>,
                  loop.now,
                );
              } catch (thrown) {
                error = thrown;
              }
            }
            loop.after(ms / 2, () => (error === undefined ? resolve(answer) : reject(error)));
            // The call reached its replica: nothing resolves until the answer is back.
            loop.quiet();
          });
        }),
    };
  }

  /** The store one instance in `region` counts with, in `mode`. */
  storeFor(mode: Mode, region: string, policy: ResolvedPolicy): Store {
    const store = this.#scenario.store;
    if (store.kind === "memory") return new MemoryStore();
    if (store.kind === "redis") return this.#redisFor(region);
    const replica = this.nearestReplica(region);
    const transport = this.transportFor(region);
    if (mode === "two-writes") {
      const client = new DynamoDbHttpClient({
        region: replica,
        credentials: SIM_CREDENTIALS,
        transport,
      });
      const pathRules = new Set(
        policy.rules.filter((rule) => rule.pathPrefix !== undefined).map((rule) => rule.id),
      );
      return new TwoWritesStore(client, store.table, pathRules);
    }
    return new DynamoDbStore({
      region: replica,
      table: store.table,
      credentials: SIM_CREDENTIALS,
      transport,
      ...(store.replicas.length > 1 ? { globalRegions: store.replicas } : {}),
      expectedRoundTripMs: this.baseRoundTrip(region, replica),
      // Hybrid counting reserves in the lease table, by default the first replica's.
      ...(store.lease === undefined
        ? { leaseRoundTripMs: this.baseRoundTrip(region, store.replicas[0] as string) }
        : {
            leaseRegion: store.lease.region,
            leaseTable: store.lease.table,
            leaseRoundTripMs: this.baseRoundTrip(region, store.lease.region),
          }),
      // `hybrid+holder`: the region holders (opt-in), in their own table where one is named.
      ...(mode === "hybrid+holder" || mode === "hybrid+allowance"
        ? {
            regionHolder: true,
            ...(store.lease?.holders === undefined ? {} : { holderTable: store.lease.holders }),
          }
        : {}),
      // `hybrid+allowance`: the holders and the regions' allowances (opt-in).
      ...(mode === "hybrid+allowance" ? { regionAllowance: true } : {}),
    });
  }

  /** The Redis store as modeled: one round trip to the primary, which counts in memory. */
  #redisFor(region: string): Store {
    const primary = this.#redisPrimary;
    const loop = this.loop;
    const clock = this.clock;
    const roundTripMs = this.baseRoundTrip(region, "primary");
    return {
      name: "redis",
      traits: { roundTripMs: () => roundTripMs },
      apply: (counters: readonly CounterSpec[]) =>
        new Promise<CounterState[]>((resolve, reject) => {
          const { ms } = this.#roundTrip(region, "primary");
          this.#onOperation({
            table: "redis",
            replica: "primary",
            operation: "EVALSHA",
            pk: (counters[0] as CounterSpec).subject,
            readUnits: 0,
            writeUnits: 1,
            replicatedWriteUnits: 0,
          });
          loop.after(ms / 2, () => {
            try {
              const states = primary.applySync(counters, clock());
              loop.after(ms / 2, () => resolve(states));
              loop.quiet();
            } catch (error) {
              reject(error);
            }
          });
        }),
    };
  }
}
