/**
 * Where the limiter runs: Lambda@Edge instances (one request at a time each, a new instance
 * with a cold start when all are busy, recycled when idle or old), gateway processes (a fixed
 * number per region, concurrent), or Worker isolates (concurrent, short-lived, a small cold
 * start). Every instance has its own decision engine (its own block cache) and its own store
 * client; what they share is what production shares: the store.
 */
import type { Decision } from "../core/decision.js";
import { DecisionEngine } from "../core/engine.js";
import { hybridCounting } from "../core/hybrid-counting.js";
import type { ResolvedPolicy } from "../core/model.js";
import type { Override } from "../core/overrides.js";
import type { RequestDescription } from "../core/types.js";
import { heldOverrides } from "../offline/reference.js";
import type { Scenario } from "./scenario.js";
import type { Arrival } from "./traffic.js";
import { isHybridMode, type Mode, type World } from "./world.js";

interface Instance {
  /** In the order instances were created (`Served.process`). */
  readonly id: number;
  readonly engine: DecisionEngine;
  readonly createdAt: number;
  /** Virtual time the instance is ready (after its cold start). */
  readyAt: number;
  lastUsed: number;
  inFlight: number;
}

export interface Served {
  readonly arrival: Arrival;
  readonly decision: Decision;
  /** Arrival to decision, virtual ms, cold start included. */
  readonly latencyMs: number;
  /** Of which the decision itself (store round trips, budget). */
  readonly decisionMs: number;
  readonly coldStart: boolean;
  /** The instance (process, isolate) that decided, numbered in the order they were created. */
  readonly process: number;
}

export class Deployment {
  readonly #world: World;
  readonly #scenario: Scenario;
  readonly #mode: Mode;
  readonly #policy: ResolvedPolicy;
  readonly #pools = new Map<string, Instance[]>();
  readonly #served: (served: Served) => void;
  readonly #roundRobin = new Map<string, number>();
  readonly #recycled = new Map<string, number>();
  instancesCreated = 0;

  readonly #overrides: readonly Override[];

  /** `overrides`: held by every instance from its start (`simulate --overrides`). */
  constructor(
    world: World,
    scenario: Scenario,
    mode: Mode,
    policy: ResolvedPolicy,
    served: (served: Served) => void,
    overrides: readonly Override[] = [],
  ) {
    this.#world = world;
    this.#scenario = scenario;
    this.#mode = mode;
    this.#policy = policy;
    this.#served = served;
    this.#overrides = overrides;
  }

  handle(arrival: Arrival): void {
    const now = this.#world.loop.now;
    const instance = this.#pick(arrival.region, now);
    const cold = instance.readyAt > now;
    instance.inFlight++;
    if (cold)
      this.#world.loop.at(instance.readyAt, () => this.#decide(instance, arrival, now, true));
    else this.#decide(instance, arrival, now, false);
  }

  #decide(instance: Instance, arrival: Arrival, arrivedAt: number, coldStart: boolean): void {
    const loop = this.#world.loop;
    const started = loop.now;
    const finish = (decision: Decision): void => {
      instance.inFlight--;
      instance.lastUsed = loop.now;
      this.#served({
        arrival,
        decision,
        latencyMs: loop.now - arrivedAt,
        decisionMs: loop.now - started,
        coldStart,
        process: instance.id,
      });
    };
    const decision = instance.engine.decide(arrival.request as RequestDescription);
    if (decision instanceof Promise) decision.then(finish);
    else {
      finish(decision);
      // Decided synchronously (the block cache, an in-process store): nothing is pending.
      loop.quiet();
    }
  }

  #pick(region: string, now: number): Instance {
    let pool = this.#pools.get(region);
    if (pool === undefined) {
      pool = [];
      this.#pools.set(region, pool);
    }
    const deployment = this.#scenario.deployment;
    if (deployment.kind === "gateway") {
      while (pool.length < deployment.processes) pool.push(this.#create(region, now, 0));
      const turn = this.#roundRobin.get(region) ?? 0;
      this.#roundRobin.set(region, turn + 1);
      return pool[turn % pool.length] as Instance;
    }
    if (deployment.kind === "workers") {
      for (let i = pool.length - 1; i >= 0; i--) {
        if (
          now - (pool[i] as Instance).createdAt >= deployment.lifetime &&
          (pool[i] as Instance).inFlight === 0
        ) {
          pool.splice(i, 1);
        }
      }
      const live = pool.filter((instance) => now - instance.createdAt < deployment.lifetime);
      if (live.length < deployment.isolates) {
        const fresh = this.#create(region, now, deployment.coldStartMs);
        pool.push(fresh);
        return fresh;
      }
      const turn = this.#roundRobin.get(region) ?? 0;
      this.#roundRobin.set(region, turn + 1);
      return live[turn % live.length] as Instance;
    }
    // Lambda@Edge: recycle idle and old instances (looked at once a simulated second), then
    // take the most recently used free one.
    const looked = this.#recycled.get(region) ?? -Infinity;
    if (now - looked >= 1000) this.#recycled.set(region, now);
    for (let i = now - looked >= 1000 ? pool.length - 1 : -1; i >= 0; i--) {
      const instance = pool[i] as Instance;
      const expired =
        now - instance.lastUsed >= deployment.idle ||
        now - instance.createdAt >= deployment.lifetime;
      if (expired && instance.inFlight === 0) pool.splice(i, 1);
    }
    let chosen: Instance | undefined;
    for (const instance of pool) {
      if (instance.inFlight === 0 && (chosen === undefined || instance.lastUsed > chosen.lastUsed))
        chosen = instance;
    }
    if (chosen !== undefined) return chosen;
    const fresh = this.#create(region, now, deployment.coldStartMs);
    pool.push(fresh);
    return fresh;
  }

  #create(region: string, now: number, coldStartMs: number): Instance {
    const id = this.instancesCreated++;
    const world = this.#world;
    const counted = world.storeFor(this.#mode, region, this.#policy);
    // Hybrid counting in front of the store, on the simulation's time (as a deployment builds it).
    const store = isHybridMode(this.#mode)
      ? hybridCounting(counted, { clock: world.clock, scheduler: world.scheduler })
      : counted;
    const engine = new DecisionEngine({
      policy: this.#policy,
      store,
      clock: world.clock,
      scheduler: world.scheduler,
      onStoreError: undefined,
      overrideWatch: heldOverrides(this.#overrides),
      // The two-writes design has no block cache: blocked clients keep writing.
      ...(this.#mode === "two-writes" ? { blockCache: false as const } : {}),
    });
    return { id, engine, createdAt: now, readyAt: now + coldStartMs, lastUsed: now, inFlight: 0 };
  }
}
