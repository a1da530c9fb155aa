/**
 * An area object (areas.ts): the `EdgelimitCounter` named `{area:<hint>}<subject>`, created with
 * its area's location hint, through which the isolates of that area count a subject's requests.
 * It runs hybrid counting (core/hybrid-counting.ts) in front of the rule objects, as one gateway
 * process of a region would: it spends units reserved in the rule objects near the isolates and
 * reserves again behind its answers. In a far area it also has
 *
 * - a holder (`AreaHolder`): the area's units of each counter and window, topped up from the
 *   rule object in the background before they run out (core/hybrid/holder.ts);
 * - an allowance (`AreaAllowances`): one unit a window that the rule object held back for the
 *   area from its first write (held-back.ts), spent here for a subject's first request in the
 *   area, so that it waits for no rule object. A subject refused at its limit while units are
 *   still held back revokes the allowances no area spent, in each area's object, and the rule
 *   object gives each revoked unit back once. Spending and revoking an allowance are both
 *   decided in the object that keeps it, one at a time: exactly one of them wins.
 *
 * In workerd an object's requests may await a call another of its requests started, and a call
 * goes on after the answer of the request that started it (checked through Miniflare in
 * test/cloudflare/areas.test.ts): the hybrid layer here shares its reservations in flight and
 * tops up in the background, which an isolate cannot (`Store.requestScopedIo`).
 *
 * What the holder keeps is in memory only: an object that is evicted loses its units (capacity
 * lost, never admitted). Allowances are in the object's storage, written before its answer.
 */
import { hybridCounting } from "../../core/hybrid-counting.js";
import type {
  CounterSpec,
  CounterState,
  HolderState,
  RegionAllowances,
  RegionHolder,
  Store,
} from "../../core/types.js";
import { LATE_GRACE_MS, windowAt, windowIndexAt } from "../../core/windows.js";
import { type AreaPlan, heldFor } from "./areas.js";
import type { WorkerEnv } from "./bindings.js";
import { type AllowanceOutcome, type OpenedEntries, REVOKED, SPENT } from "./held-back.js";
import { CloudflareStore } from "./store.js";

export const AREA_PATH = "/area/";

/** `POST /area/apply`: an isolate's counters of one request. */
export interface AreaApplyRequest {
  readonly counters: readonly CounterSpec[];
  readonly now: number;
  readonly plan: AreaPlan;
  /** The subject this object is named for. */
  readonly subject: string;
}

/** `POST /area/claim` and `/area/revoke`: an allowance of this object's area. */
interface AllowanceRequest {
  readonly counter: CounterSpec;
  readonly now: number;
}

export class AreaLedger {
  readonly #env: WorkerEnv;
  /** The object's entries (its allowances among them). */
  readonly #open: (now: number) => OpenedEntries;
  #layer: { plan: string; counting: Store } | undefined;

  constructor(env: WorkerEnv, open: (now: number) => OpenedEntries) {
    this.#env = env;
    this.#open = open;
  }

  async handle(request: Request, op: string): Promise<Response> {
    if (request.method !== "POST") return new Response("not found", { status: 404 });
    let body: unknown;
    try {
      body = await request.json();
      if (op === "apply") {
        const asked = parseApply(body);
        const now = Math.max(asked.now, Date.now());
        const states = await this.#counting(asked).apply(asked.counters, now);
        return Response.json({ states } satisfies { states: CounterState[] });
      }
      if (op === "claim") return Response.json({ spent: await this.claim(parseAllowance(body)) });
      if (op === "revoke") {
        return Response.json({ outcome: await this.revoke(parseAllowance(body)) });
      }
    } catch (error) {
      const status = error instanceof TypeError || error instanceof SyntaxError ? 400 : 502;
      return new Response(error instanceof Error ? error.message : String(error), { status });
    }
    return new Response("not found", { status: 404 });
  }

  /** Spends this area's allowance of `counter` in the window of `now`: whether it was there. */
  async claim({ counter, now }: AllowanceRequest): Promise<boolean> {
    const { entries, save } = this.#open(Date.now());
    const key = allowanceKey(counter, now);
    if (entries.get(key) !== undefined) return false;
    entries.set(key, SPENT, windowAt(counter.window, now).end);
    await save();
    return true;
  }

  /** Revokes this area's allowance of `counter` in the window of `now`, unless it was spent. */
  async revoke({ counter, now }: AllowanceRequest): Promise<AllowanceOutcome> {
    const { entries, save } = this.#open(Date.now());
    const key = allowanceKey(counter, now);
    if (entries.get(key)?.state === SPENT) return SPENT;
    entries.set(key, REVOKED, windowAt(counter.window, now).end);
    await save();
    return REVOKED;
  }

  /** The hybrid layer of this object, for the areas the isolates describe. */
  #counting(asked: AreaApplyRequest): Store {
    const plan = JSON.stringify(asked.plan);
    if (this.#layer?.plan === plan) return this.#layer.counting;
    const { area, lease, far, binding } = asked.plan;
    const rules = new CloudflareStore({
      env: this.#env,
      ratelimits: {},
      counter: binding,
      // The same far areas as the isolates' (`farAreas`: each hint that is not the lease's);
      // never located, this store counts in the rule objects.
      areas: { lease, byContinent: Object.fromEntries(far.map((hint) => [hint, hint])) },
    });
    const farHere = area !== lease;
    const inner: Store = {
      name: rules.name,
      apply: (counters, now) => rules.apply(counters, now),
      ...(farHere
        ? {
            holder: new AreaHolder(),
            allowances: new AreaAllowances(asked.plan, asked.subject, this, rules),
          }
        : {}),
    };
    const counting = hybridCounting(inner);
    this.#layer = { plan, counting };
    return counting;
  }
}

function allowanceKey(counter: CounterSpec, now: number): string {
  return `{allow}${counter.key}#${windowIndexAt(counter.window, now)}`;
}

/** A far area's units of each counter and window, spent by its object's hybrid layer. */
class AreaHolder implements RegionHolder {
  readonly #held = new Map<string, Held>();

  async take(counter: CounterSpec, units: number, now: number): Promise<HolderState> {
    const held = this.#held.get(holderKey(counter, now));
    if (held === undefined) return { taken: 0, granted: 0, left: 0, storeCount: 0 };
    // What is left when that is less than asked, if it covers the request's cost.
    const taken = held.left >= units ? units : held.left >= counter.cost ? held.left : 0;
    held.left -= taken;
    return { ...stateOf(held), taken };
  }

  async fill(
    counter: CounterSpec,
    units: number,
    storeCount: number,
    now: number,
  ): Promise<HolderState> {
    const held = this.#entry(counter, now);
    held.granted += units;
    held.left += units;
    held.storeCount = Math.max(held.storeCount, storeCount);
    return { ...stateOf(held), taken: 0 };
  }

  async markFull(counter: CounterSpec, now: number): Promise<void> {
    this.#entry(counter, now).fullAt = now;
  }

  #entry(counter: CounterSpec, now: number): Held {
    const key = holderKey(counter, now);
    let held = this.#held.get(key);
    if (held === undefined) {
      // Windows that have ended hold nothing that may still be spent.
      for (const [other, old] of this.#held) {
        if (old.end + LATE_GRACE_MS < now) this.#held.delete(other);
      }
      held = {
        granted: 0,
        left: 0,
        storeCount: 0,
        fullAt: undefined,
        end: windowAt(counter.window, now).end,
      };
      this.#held.set(key, held);
    }
    return held;
  }
}

interface Held {
  granted: number;
  left: number;
  storeCount: number;
  fullAt: number | undefined;
  readonly end: number;
}

function holderKey(counter: CounterSpec, now: number): string {
  return `${counter.key}|${counter.limit}|${windowIndexAt(counter.window, now)}`;
}

function stateOf(held: Held): HolderState {
  return {
    taken: 0,
    granted: held.granted,
    left: held.left,
    storeCount: held.storeCount,
    ...(held.fullAt === undefined ? {} : { fullAt: held.fullAt }),
  };
}

/**
 * The allowances of a far area. A counter's allowance in an area is kept by that area's object
 * of the counter's own subject, whichever object counts the request: claims and revocations of
 * another subject's allowance are calls to its object.
 */
class AreaAllowances implements RegionAllowances {
  readonly #plan: AreaPlan;
  readonly #subject: string;
  readonly #here: AreaLedger;
  readonly #rules: CloudflareStore;

  constructor(plan: AreaPlan, subject: string, here: AreaLedger, rules: CloudflareStore) {
    this.#plan = plan;
    this.#subject = subject;
    this.#here = here;
    this.#rules = rules;
  }

  covers(counter: CounterSpec): boolean {
    return (heldFor(counter, this.#plan.far.length) ?? 0) > 0;
  }

  async claim(counter: CounterSpec, now: number): Promise<boolean> {
    const { area } = this.#plan;
    if (counter.subject === this.#subject) return this.#here.claim({ counter, now });
    const answer = (await this.#call(area, "claim", counter, now)) as { spent: boolean };
    return answer.spent === true;
  }

  async reclaim(counter: CounterSpec, now: number, refund: number): Promise<number> {
    const { far, area } = this.#plan;
    const outcomes = await Promise.all(
      far.map(async (other) => {
        try {
          if (other === area && counter.subject === this.#subject) {
            return await this.#here.revoke({ counter, now });
          }
          const answer = (await this.#call(other, "revoke", counter, now)) as {
            outcome: AllowanceOutcome;
          };
          return answer.outcome;
        } catch {
          // Unknown: the allowance stays held back (capacity unused, never admitted twice).
          return undefined;
        }
      }),
    );
    const given = await Promise.all([
      ...outcomes.map((outcome, i) =>
        outcome === undefined
          ? 0
          : this.#rules.release({ counter, now, area: far[i] as string, outcome }).catch(() => 0),
      ),
      refund > 0 ? this.refund(counter, now, refund) : 0,
    ]);
    return given.slice(0, far.length).reduce((sum, units) => sum + units, 0);
  }

  async refund(counter: CounterSpec, now: number, units: number): Promise<number> {
    // Not given back when the call fails: the subject's capacity is that much lower.
    await this.#rules.release({ counter, now, refund: units }).catch(() => 0);
    return 0;
  }

  /** The allowance of `counter` in `area`, kept by that area's object of its subject. */
  #call(area: string, op: string, counter: CounterSpec, now: number): Promise<unknown> {
    const body: AllowanceRequest = { counter, now };
    return this.#rules.callArea(area, counter.subject, op, body);
  }
}

function parseApply(input: unknown): AreaApplyRequest {
  const body = input as Partial<AreaApplyRequest> | null;
  const plan = body?.plan;
  if (
    body === null ||
    !Array.isArray(body.counters) ||
    typeof body.now !== "number" ||
    !Number.isFinite(body.now) ||
    typeof body.subject !== "string" ||
    typeof plan?.area !== "string" ||
    typeof plan.lease !== "string" ||
    typeof plan.binding !== "string" ||
    !Array.isArray(plan.far)
  ) {
    throw new TypeError("expected { counters, now, plan: { area, lease, far, binding }, subject }");
  }
  return body as AreaApplyRequest;
}

function parseAllowance(input: unknown): AllowanceRequest {
  const body = input as Partial<AllowanceRequest> | null;
  if (
    typeof body?.counter?.key !== "string" ||
    typeof body.counter.window !== "object" ||
    typeof body.now !== "number" ||
    !Number.isFinite(body.now)
  ) {
    throw new TypeError("expected { counter: CounterSpec, now: number }");
  }
  return body as AllowanceRequest;
}
