/**
 * A rule object's part in the areas' allowances (areas.ts): from its first write in a window
 * under a rule that has them, it holds back one unit for each far area, counted as if spent, so
 * that what it grants never reaches them. An area that revoked its allowance (area-object.ts)
 * gives its unit back here once (`release`); one that spent it leaves it held.
 *
 * Bound: what the object grants in a window stays below the limit less the units still held
 * back, each of them an allowance not revoked; an area spends at most its own allowance, and
 * never a revoked one (spending and revoking are both decided in the area's object, one at a
 * time). The limit in all.
 */
import { countedAt, type WindowedState } from "../../core/algorithms/fixed-window.js";
import type { CounterSpec, CounterState } from "../../core/types.js";
import { windowEndOf, windowIndexAt } from "../../core/windows.js";
import { heldFor } from "./areas.js";

export const RELEASE_PATH = "/release";
export const SPENT = 1;
export const REVOKED = 2;
export type AllowanceOutcome = typeof SPENT | typeof REVOKED;

/** What the object keeps beside a counter for its allowances, in one window. */
interface HeldEntry {
  readonly index: number;
  /** Units held back at the window's first write. */
  readonly held: number;
  /** Each area whose allowance was settled here: spent (still held) or revoked (given back). */
  readonly marks: Readonly<Record<string, AllowanceOutcome>>;
}

/** `POST /release`: an area's allowance settled, and units of a refused reservation given back. */
export interface ReleaseRequest {
  readonly counter: CounterSpec;
  /** A stamp in the window concerned (the caller's: never moved to the object's clock). */
  readonly now: number;
  readonly area?: string;
  readonly outcome?: AllowanceOutcome;
  readonly refund?: number;
}

/** How the object reads and writes its entries (counter-object.ts). */
export interface Entries {
  get(key: string): { readonly state: unknown; readonly expiresAt: number } | undefined;
  set(key: string, state: unknown, expiresAt: number): void;
}

/** An object's entries, and the write (durable before the object answers) of what changed. */
export interface OpenedEntries {
  readonly entries: Entries;
  save(): Promise<void>;
}

function heldKey(counterKey: string): string {
  return `{held}${counterKey}`;
}

/** The units held back for one counter of a request, as the object applies it. */
export interface Holding {
  /** Held back and not given back: counted. */
  readonly counted: number;
  /** Neither spent nor revoked: what a subject at its limit may still take back. */
  readonly back: number;
}

/**
 * The units `spec` holds back in the window it is counted in at `now`, holding them from the
 * window's first write under a rule that has them; undefined for a counter without allowances.
 */
export function holdingFor(
  entries: Entries,
  spec: CounterSpec,
  now: number,
  far: number,
): Holding | undefined {
  // Only fixed windows have allowances (areas.ts, `heldFor`).
  if (spec.algorithm !== "fixed-window") return undefined;
  const units = heldFor(spec, far) ?? 0;
  const key = heldKey(spec.key);
  const found = entries.get(key)?.state as HeldEntry | undefined;
  const state = entries.get(spec.key)?.state as WindowedState | undefined;
  const index = countedAt(state, now, spec).index;
  let entry = found?.index === index ? found : undefined;
  if (entry === undefined) {
    if (units === 0) return undefined;
    entry = { index, held: units, marks: {} };
    entries.set(key, entry, windowEndOf(spec.window, index));
  }
  const marks = Object.values(entry.marks);
  const revoked = marks.filter((mark) => mark === REVOKED).length;
  return { counted: entry.held - revoked, back: Math.max(0, entry.held - marks.length) };
}

/** `spec` as the object's algorithms see it: the units held back are not its to grant. */
export function limitedBy(spec: CounterSpec, holding: Holding | undefined): CounterSpec {
  if (holding === undefined || holding.counted === 0) return spec;
  return { ...spec, limit: Math.max(0, spec.limit - holding.counted) };
}

/** The object's answer for `spec`: the units held back count as counted. */
export function withHolding(state: CounterState, holding: Holding | undefined): CounterState {
  if (holding === undefined) return state;
  return { ...state, count: state.count + holding.counted, heldBack: holding.back };
}

/**
 * Settles an area's allowance (a revoked one's unit is given back once) and takes a refused
 * reservation's units out of the count, in the window of the request's stamp only: resolves to
 * the units given back for allowances.
 */
export function release(entries: Entries, request: ReleaseRequest): number {
  const { counter, now, area, outcome, refund = 0 } = request;
  const index = windowIndexAt(counter.window, now);
  let given = 0;
  const key = heldKey(counter.key);
  const held = entries.get(key);
  const entry = held?.state as HeldEntry | undefined;
  if (
    held !== undefined &&
    entry?.index === index &&
    area !== undefined &&
    outcome !== undefined &&
    entry.marks[area] === undefined
  ) {
    entries.set(key, { ...entry, marks: { ...entry.marks, [area]: outcome } }, held.expiresAt);
    if (outcome === REVOKED) given = 1;
  }
  const counted = entries.get(counter.key);
  const state = counted?.state as WindowedState | undefined;
  if (refund > 0 && counted !== undefined && state?.index === index) {
    entries.set(
      counter.key,
      { ...state, count: Math.max(0, state.count - refund) },
      counted.expiresAt,
    );
  }
  return given;
}

/** Only our own objects send it, but a malformed body must not corrupt a count. */
export function parseRelease(input: unknown): ReleaseRequest {
  const body = input as Partial<ReleaseRequest> | null;
  const counter = body?.counter;
  if (
    body === null ||
    typeof counter?.key !== "string" ||
    typeof counter.window !== "object" ||
    typeof body.now !== "number" ||
    !Number.isFinite(body.now)
  ) {
    throw new TypeError("expected { counter: CounterSpec, now: number, area?, outcome?, refund? }");
  }
  if (body.outcome !== undefined && body.outcome !== SPENT && body.outcome !== REVOKED) {
    throw new TypeError("outcome must be 1 (spent) or 2 (revoked)");
  }
  if (body.refund !== undefined && !(Number.isInteger(body.refund) && body.refund >= 0)) {
    throw new TypeError("refund must be a whole number of units");
  }
  return body as ReleaseRequest;
}
