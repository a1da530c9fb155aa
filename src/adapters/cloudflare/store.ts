import { EdgelimitError } from "../../core/errors.js";
import { GenerationalCache } from "../../core/generational-cache.js";
import {
  checkOptions,
  fields,
  type OptionsShape,
  positiveMs,
  required,
} from "../../core/options.js";
import type { OverrideSource } from "../../core/overrides.js";
import type { CounterSpec, CounterState, Store, StoreTraits } from "../../core/types.js";
import { RemoteGuard } from "../../stores/remote/guard.js";
import {
  type AreaOptions,
  type AreaPlan,
  areaObjectName,
  areaOfContinent,
  farAreas,
} from "./areas.js";
import type { DurableObjectNamespaceLike, RateLimitBinding, WorkerEnv } from "./bindings.js";
import { bindingNameFor } from "./check.js";
import { RELEASE_PATH, type ReleaseRequest } from "./held-back.js";
import { DurableObjectOverrides } from "./override-source.js";
import {
  APPLY_PATH,
  type CounterObjectAnswer,
  type CounterObjectRequest,
  REFUND_PATH,
} from "./protocol.js";
import { bindingKey, bindingState } from "./rate-limit-binding.js";

export interface CloudflareStoreOptions {
  /** The Worker's `env`, where the bindings live. */
  readonly env: WorkerEnv;
  /** Namespace (or rule id) -> name of its `ratelimits` binding. */
  readonly ratelimits: Readonly<Record<string, string>>;
  /**
   * Ids of the rules the native binding counts (`backend: approximate`); every other rule is
   * counted exactly in a Durable Object. `approximateRules(policy)` lists them.
   */
  readonly approximate?: readonly string[];
  /**
   * The limit each approximate rule's binding holds (its rule's limit: wrangler.toml must say
   * the same), by rule id; `bindingLimits(policy)` lists them. A counter of such a rule that asks
   * another limit (an operator's `limit` override) is counted exactly in a Durable Object, since
   * a binding's limit cannot change at run time. Without it, the binding counts it at its own.
   */
  readonly bindingLimits?: Readonly<Record<string, number>>;
  /** Name of the Durable Object namespace binding for exact counters. */
  readonly counter: string;
  /**
   * A counter object's call still unanswered after this long has failed (default 1000 ms),
   * and counts for that object's circuit breaker.
   */
  readonly callTimeoutMs?: number;
  /**
   * Hybrid counting by area (areas.ts; docs/cloudflare.md, "Areas"): an isolate counts a
   * request's hybrid rules through its area's object of the subject, near it, which spends units
   * it reserved in the rule objects (created in the `lease` area). The store then counts hybrid
   * rules itself (no `hybridCounting` in front). Off by default.
   */
  readonly areas?: AreaOptions;
}

function cloudflareStoreShape() {
  return {
    env: required("object"),
    ratelimits: required("object"),
    approximate: "array",
    bindingLimits: "object",
    counter: required("string"),
    callTimeoutMs: "number",
    areas: fields({ lease: required("string"), byContinent: "object" }),
  } satisfies OptionsShape<CloudflareStoreOptions>;
}

const OBJECT_ORIGIN = "https://edgelimit-counter";
const AREA_ORIGIN = "https://edgelimit-area";
/** How long a counter object's call may take before it has failed, unless told otherwise. */
export const DEFAULT_CALL_TIMEOUT_MS = 1000;
/** Counter objects whose failures are remembered (at most twice this many). */
const GUARDED_OBJECTS_PER_GENERATION = 4096;

/**
 * Routes each counter to the backend its rule names, in seed 003's order: the native binding
 * first, as the cheap filter; the Durable Object only for requests every binding admitted, and
 * only for exact rules.
 *
 * Where the all-or-nothing contract is weaker (see docs/cloudflare.md):
 * - the binding counts every call and cannot take one back, so a request that a later counter
 *   refuses stays counted on the bindings that admitted it. Bindings are called one at a time
 *   and the first refusal stops the rest, which limits this to the bindings before it;
 * - exact counters with different keys live in different objects, which are not one
 *   transaction. They are applied in parallel; if one refuses, the others are refunded. Between
 *   the two calls another request may see the higher count: it may be refused, never admitted
 *   in excess.
 * - `observe` (shadow) counters are always counted, as the contract asks, so a shadow exact rule
 *   does reach its object for requests the binding refused.
 *
 * Each counter object's calls go through a guard of the remote-store kit (`stores/remote/`): a
 * call timeout, and a circuit breaker per object (an object is one key's, so one that is
 * overloaded or gone fails its own key at once, never every other key in the isolate).
 */
export class CloudflareStore implements Store {
  readonly name = "cloudflare";
  // workerd refuses to let one request await I/O another request started.
  readonly traits: StoreTraits;
  readonly #options: CloudflareStoreOptions;
  /** With areas: every area but the lease area (each has an allowance). */
  readonly #far: readonly string[];
  /** With areas: this isolate's area, from its first request (`locate`). */
  #here: string | undefined;
  readonly #approximate: ReadonlySet<string>;
  readonly #objects: DurableObjectNamespaceLike;
  readonly #guards = new GenerationalCache<RemoteGuard>(GUARDED_OBJECTS_PER_GENERATION);
  #overrides: DurableObjectOverrides | undefined;

  constructor(options: CloudflareStoreOptions) {
    if (typeof EDGELIMIT_BUNDLE === "undefined")
      checkOptions("cloudflareStore", options, cloudflareStoreShape(), { code: "EL_STORE_OPTION" });
    if (options.callTimeoutMs !== undefined) {
      positiveMs(options.callTimeoutMs, "cloudflareStore", "callTimeoutMs");
    }
    this.#options = options;
    const objects = options.env[options.counter] as DurableObjectNamespaceLike | undefined;
    if (typeof objects?.idFromName !== "function") {
      throw new EdgelimitError(
        "EL_STORE_BINDING",
        `cloudflare: no Durable Object binding "${options.counter}" in env; declare it in wrangler.toml ([[durable_objects.bindings]] name = "${options.counter}", class_name = "EdgelimitCounter")`,
      );
    }
    this.#objects = objects;
    this.#approximate = new Set(options.approximate ?? []);
    this.#far = options.areas === undefined ? [] : farAreas(options.areas);
    // With areas, the area objects count hybrid rules (area-object.ts).
    this.traits =
      options.areas === undefined
        ? { requestScopedIo: true }
        : { requestScopedIo: true, hybrid: true };
  }

  /**
   * With areas, the isolate's area, from a request's `cf.continent`: the first request's (an
   * isolate runs in one data center). Until then, hybrid rules count in the rule objects.
   */
  locate(cf: unknown): void {
    const areas = this.#options.areas;
    if (areas === undefined || this.#here !== undefined) return;
    this.#here = areaOfContinent(areas, (cf as { continent?: unknown } | undefined)?.continent);
  }

  /** Settles an area's allowance in the rule object (held-back.ts): units given back. */
  async release(request: ReleaseRequest): Promise<number> {
    const key = request.counter.key;
    const answer = (await this.#guard(key).run(() =>
      this.#post(this.#ruleObject(key), OBJECT_ORIGIN + RELEASE_PATH, request, key),
    )) as { given: number };
    return answer.given;
  }

  /**
   * The operators' overrides, in the Durable Object named `{overrides}` of the counter binding
   * (override-object.ts). The limiter reads them when a request finds its copy `refreshMs` old.
   */
  overrides(): OverrideSource {
    this.#overrides ??= new DurableObjectOverrides(this.#objects);
    return this.#overrides;
  }

  /**
   * The backend that counts `spec`: its rule's (see `CloudflareStoreOptions.approximate`),
   * unless an override asks a limit the rule's binding does not hold (`bindingLimits`).
   */
  #backendOf(spec: CounterSpec): "approximate" | "exact" {
    if (!this.#approximate.has(spec.ruleId)) return "exact";
    const held = this.#options.bindingLimits?.[spec.ruleId];
    return held === undefined || held === spec.limit ? "approximate" : "exact";
  }

  async apply(counters: readonly CounterSpec[], now: number): Promise<CounterState[]> {
    const states: (CounterState | undefined)[] = new Array(counters.length);
    let admitted = true;

    // The cheap filter. Shadow counters are counted whatever the others say.
    for (let i = 0; i < counters.length; i++) {
      const spec = counters[i] as CounterSpec;
      if (this.#backendOf(spec) !== "approximate" || spec.mode !== "enforce") continue;
      if (!admitted) continue;
      // A cost of 0 reads (a peek): the binding would count the call and has no count to tell.
      if (spec.cost === 0) {
        states[i] = bindingState(spec, true, now);
        continue;
      }
      const success = await this.#limit(spec);
      states[i] = bindingState(spec, success, now);
      if (!success) admitted = false;
    }
    await Promise.all(
      counters.map(async (spec, i) => {
        if (this.#backendOf(spec) !== "approximate" || spec.mode !== "observe") return;
        if (spec.cost === 0) {
          states[i] = bindingState(spec, true, now);
          return;
        }
        states[i] = bindingState(spec, await this.#limit(spec), now);
      }),
    );

    // The exact counters, one object per key, for what passed the filter.
    const byKey = new Map<string, number[]>();
    const objects: number[] = [];
    counters.forEach((spec, i) => {
      if (this.#backendOf(spec) !== "exact") return;
      if (!admitted && spec.mode === "enforce") return;
      objects.push(i);
      const indexes = byKey.get(spec.key);
      if (indexes === undefined) byKey.set(spec.key, [i]);
      else indexes.push(i);
    });
    const area = this.#here;
    const hybrid = objects.find((i) => (counters[i] as CounterSpec).counting === "hybrid");
    if (area !== undefined && hybrid !== undefined) {
      // Through the area's object of the first hybrid counter's subject: one call, near.
      const own = objects.map((i) => counters[i] as CounterSpec);
      const answer = await this.#callArea(
        area,
        (counters[hybrid] as CounterSpec).subject,
        own,
        now,
      );
      objects.forEach((index, j) => {
        states[index] = answer[j];
      });
      return counters.map((_spec, i) => states[i] ?? notConsulted(now));
    }
    const calls = [...byKey].map(async ([key, indexes]) => {
      const own = indexes.map((i) => counters[i] as CounterSpec);
      const answer = (await this.#call(key, APPLY_PATH, own, now)) as CounterObjectAnswer;
      indexes.forEach((index, j) => {
        states[index] = answer.states[j];
      });
      return { key, own, indexes, admitted: answer.admitted };
    });
    const answers = await Promise.all(calls);
    const refused = answers.some((answer) => !answer.admitted);
    if (refused && admitted) {
      const refunded = answers.filter(
        (answer) => answer.admitted && answer.own.some((spec) => spec.mode === "enforce"),
      );
      await Promise.all(
        refunded.map((answer) => this.#call(answer.key, REFUND_PATH, answer.own, now)),
      );
      // Their answers describe the count before the refund: say what the object now holds.
      for (const answer of refunded) {
        for (const index of answer.indexes) {
          const spec = counters[index] as CounterSpec;
          const state = states[index];
          if (state === undefined || spec.mode !== "enforce") continue;
          states[index] = {
            ...state,
            count: Math.max(0, state.count - spec.cost),
            remaining: Math.min(spec.limit, state.remaining + spec.cost),
          };
        }
      }
    }

    return counters.map((_spec, i) => states[i] ?? notConsulted(now));
  }

  async #limit(spec: CounterSpec): Promise<boolean> {
    const name = bindingNameFor(spec.ruleId, spec.namespace, this.#options.ratelimits);
    const binding = name === undefined ? undefined : (this.#options.env[name] as RateLimitBinding);
    if (typeof binding?.limit !== "function") {
      throw new EdgelimitError(
        "EL_STORE_BINDING",
        `cloudflare: rule "${spec.ruleId}" needs a rate-limit binding for namespace "${spec.namespace}"${name === undefined ? "" : ` (env.${name} is missing)`}; map it in ratelimits and declare it in wrangler.toml [[ratelimits]]`,
      );
    }
    // `delta` only when needed: the local emulator refuses options it does not know.
    const options =
      spec.cost === 1 ? { key: bindingKey(spec) } : { key: bindingKey(spec), delta: spec.cost };
    const { success } = await binding.limit(options);
    return success;
  }

  /** The guard of the calls to one object (named `name`). */
  #guard(name: string): RemoteGuard {
    let guard = this.#guards.get(name);
    if (guard === undefined) {
      guard = new RemoteGuard({
        name: `counter object for ${name}`,
        owner: "cloudflareStore",
        timeoutMs: this.#options.callTimeoutMs ?? DEFAULT_CALL_TIMEOUT_MS,
      });
      this.#guards.set(name, guard);
    }
    return guard;
  }

  async #call(
    key: string,
    path: string,
    counters: readonly CounterSpec[],
    now: number,
  ): Promise<CounterObjectAnswer | undefined> {
    // With areas, the rule object holds units back for the far areas' allowances.
    const body: CounterObjectRequest =
      this.#far.length === 0 ? { counters, now } : { counters, now, held: this.#far.length };
    const answer = await this.#guard(key).run(() =>
      this.#post(this.#ruleObject(key), OBJECT_ORIGIN + path, body, key),
    );
    return path === APPLY_PATH ? (answer as CounterObjectAnswer) : undefined;
  }

  /** Counts `counters` in `area`'s object of `subject` (area-object.ts). */
  async #callArea(
    area: string,
    subject: string,
    counters: readonly CounterSpec[],
    now: number,
  ): Promise<CounterState[]> {
    const areas = this.#options.areas as AreaOptions;
    const plan: AreaPlan = {
      area,
      lease: areas.lease,
      far: this.#far,
      binding: this.#options.counter,
    };
    const answer = await this.callArea(area, subject, "apply", { counters, now, plan, subject });
    return (answer as { states: CounterState[] }).states;
  }

  /** `POST /area/<op>` to `area`'s object of `subject` (area-object.ts), through its guard. */
  callArea(area: string, subject: string, op: string, body: unknown): Promise<unknown> {
    const name = areaObjectName(area, subject);
    const stub = this.#objects.get(this.#objects.idFromName(name), { locationHint: area });
    return this.#guard(name).run(() => this.#post(stub, `${AREA_ORIGIN}/area/${op}`, body, name));
  }

  /** A rule object: where the lease area says, with areas (else where first asked for). */
  #ruleObject(key: string) {
    const lease = this.#options.areas?.lease;
    const id = this.#objects.idFromName(key);
    return lease === undefined
      ? this.#objects.get(id)
      : this.#objects.get(id, { locationHint: lease });
  }

  async #post(
    stub: ReturnType<DurableObjectNamespaceLike["get"]>,
    url: string,
    body: unknown,
    name: string,
  ): Promise<unknown> {
    const response = await stub.fetch(url, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(body),
    });
    if (!response.ok) {
      throw new EdgelimitError(
        "EL_STORE_FAILED",
        `cloudflare: counter object for ${name} answered ${response.status}: ${await response.text()}`,
      );
    }
    return response.status === 204 ? undefined : response.json();
  }
}

/** An exact counter the request never reached, because a binding refused it first. */
function notConsulted(now: number): CounterState {
  return {
    allowed: true,
    count: 0,
    remaining: 0,
    resetAt: now,
    retryAfterMs: 0,
    countUnknown: true,
  };
}

export function cloudflareStore(options: CloudflareStoreOptions): CloudflareStore {
  return new CloudflareStore(options);
}
