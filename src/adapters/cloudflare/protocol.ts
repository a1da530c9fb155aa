/** What the Worker and a counter object (counter-object.ts) say to each other. */
import type { CounterSpec, CounterState } from "../../core/types.js";

export const APPLY_PATH = "/apply";
export const REFUND_PATH = "/refund";

/** What the Worker sends to a counter object: the counters of one request that live in it. */
export interface CounterObjectRequest {
  readonly counters: readonly CounterSpec[];
  readonly now: number;
  /**
   * With areas (areas.ts): how many far areas have allowances, for which this object holds back
   * units of the hybrid fixed windows that have room for them (held-back.ts).
   */
  readonly held?: number;
}

export interface CounterObjectAnswer {
  readonly states: CounterState[];
  /** Whether every enforce counter in this object admitted the request (and so counted it). */
  readonly admitted: boolean;
}
