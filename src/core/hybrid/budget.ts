/**
 * How long a request with hybrid counters may take (see hybrid-counting.ts): it may wait for
 * other requests' reservations, then reserve itself, and the decision budget covers all of it.
 */
import type { CounterSpec } from "../types.js";
import { isHybrid } from "./spend.js";

/**
 * Times a request waits for another's reservation before it sends its own: twice, so that
 * requests that were all short when one reservation landed wait for a single next one (sent by
 * the first of them, covering what they all want) instead of each sending its own. A request
 * takes at most three round trips for its reservation (see `roundTripOf`).
 */
export const MAX_WAITS = 2;

/**
 * A request with hybrid counters may wait for two other reservations, then reserve itself,
 * then count its exact counters: up to three round trips to where reservations live and one to
 * where the rest is counted. Its budget is added to all of them.
 */
export function roundTripOf(
  counters: readonly CounterSpec[],
  roundTrip: (counters: readonly CounterSpec[]) => number,
): number {
  if (!counters.some(isHybrid)) return roundTrip(counters);
  const hybrid = counters.filter(isHybrid);
  const rest = counters.filter((counter) => !isHybrid(counter));
  return (MAX_WAITS + 1) * roundTrip(hybrid) + (rest.length > 0 ? roundTrip(rest) : 0);
}
