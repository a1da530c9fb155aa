/**
 * Why the bounded caches (`GenerationalCache`: counters, tokens, block cache, reservations) are
 * two generations of maps rather than one Map evicting its oldest key: a stream of new keys (a
 * new client per request) against a bound of 10,000 and 100,000 keys, inserts per second of
 * each, in the same run.
 *
 *   npx tsx bench/bounded-cache.bench.ts      (or: npm run bench -- bounded-cache)
 */
import { cpus } from "node:os";
import { GenerationalCache } from "../src/core/generational-cache.js";

const ROUND_MS = Number(process.env.BENCH_ROUND_MS ?? 1000);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);

interface Bounded {
  get(key: string): number | undefined;
  set(key: string, value: number): void;
}

/** One Map, the oldest key evicted on each insert past the bound (first in, first out). */
class OldestEvicted implements Bounded {
  readonly #map = new Map<string, number>();
  readonly #bound: number;
  constructor(bound: number) {
    this.#bound = bound;
  }
  get(key: string): number | undefined {
    return this.#map.get(key);
  }
  set(key: string, value: number): void {
    this.#map.set(key, value);
    if (this.#map.size > this.#bound) {
      const oldest = this.#map.keys().next().value as string;
      this.#map.delete(oldest);
    }
  }
}

function rate(make: () => Bounded, bound: number): number {
  const cache = make();
  // Fill to the bound first: the steady state is what a busy process lives in.
  let i = 0;
  for (; i < bound * 2; i++) cache.set(`client-${i}`, i);
  const started = performance.now();
  let done = 0;
  while (performance.now() - started < ROUND_MS) {
    for (let j = 0; j < 1000; j++, i++) {
      const key = `client-${i}`;
      if (cache.get(key) === undefined) cache.set(key, i);
    }
    done += 1000;
  }
  return done / ((performance.now() - started) / 1000);
}

const median = (values: number[]) =>
  [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] as number;

console.log(`machine: ${cpus().length} cores, ${cpus()[0]?.model.trim()}, node ${process.version}`);
console.log(
  `a new key per insert, ${ROUNDS} interleaved rounds of ${ROUND_MS} ms, median inserts/s:\n`,
);
console.log("| bound | one Map, oldest evicted | GenerationalCache | ratio |");
console.log("|---:|---:|---:|---:|");
for (const bound of [10_000, 100_000]) {
  const fifo: number[] = [];
  const generational: number[] = [];
  for (let round = 0; round < ROUNDS; round++) {
    fifo.push(rate(() => new OldestEvicted(bound), bound));
    generational.push(rate(() => new GenerationalCache<number>(Math.floor(bound / 2)), bound));
  }
  const a = median(fifo);
  const b = median(generational);
  console.log(
    `| ${bound.toLocaleString("en")} | ${(a / 1e6).toFixed(2)} M | ${(b / 1e6).toFixed(2)} M | ${(b / a).toFixed(1)}x |`,
  );
}
