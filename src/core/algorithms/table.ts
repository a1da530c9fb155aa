import type { AlgorithmName } from "../types.js";
import { fixedWindow } from "./fixed-window.js";
import { slidingWindow } from "./sliding-window.js";
import { tokenBucket } from "./token-bucket.js";
import type { Algorithm } from "./types.js";

// biome-ignore lint/suspicious/noExplicitAny: states differ per algorithm; stores keep them opaque.
export const ALGORITHMS: Readonly<Record<AlgorithmName, Algorithm<any>>> = {
  "fixed-window": fixedWindow,
  "sliding-window": slidingWindow,
  "token-bucket": tokenBucket,
};
