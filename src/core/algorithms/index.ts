export { type AppliedCounters, applyCounters, type CounterStates } from "./apply.js";
export {
  type CountedAt,
  countedAt,
  fixedWindow,
  ownState,
  rollWindow,
  type WindowedState,
} from "./fixed-window.js";
export { slidingWindow } from "./sliding-window.js";
export { ALGORITHMS } from "./table.js";
export { type TokenBucketState, tokenBucket } from "./token-bucket.js";
export type { Algorithm, CounterRule } from "./types.js";
