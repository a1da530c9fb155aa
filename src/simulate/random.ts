/**
 * A seeded pseudo-random generator (mulberry32 over a splitmix32-mixed seed): the only source of
 * randomness in a simulation, so that a scenario and a seed always give the same run.
 * `Math.random` is never used.
 */
export class Random {
  #state: number;

  constructor(seed: number) {
    let z = (seed >>> 0) + 0x9e3779b9;
    z = Math.imul(z ^ (z >>> 16), 0x85ebca6b);
    z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35);
    this.#state = (z ^ (z >>> 16)) >>> 0;
  }

  /** A new generator whose sequence depends only on this one's seed and `label`. */
  fork(label: string): Random {
    let hash = this.#state;
    for (let i = 0; i < label.length; i++) hash = Math.imul(hash ^ label.charCodeAt(i), 16777619);
    return new Random(hash >>> 0);
  }

  /** Uniform in [0, 1). */
  next(): number {
    this.#state = (this.#state + 0x6d2b79f5) >>> 0;
    let t = this.#state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }

  int(below: number): number {
    return Math.floor(this.next() * below);
  }

  /** Exponential with this mean: the gap between Poisson arrivals. */
  exponential(mean: number): number {
    return -Math.log(1 - this.next()) * mean;
  }

  /** Standard normal (Box-Muller). */
  normal(): number {
    const u = 1 - this.next();
    const v = this.next();
    return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * v);
  }

  /** Log-normal whose median is `median` and whose log has deviation `sigma`. */
  logNormal(median: number, sigma: number): number {
    return median * Math.exp(sigma * this.normal());
  }

  /** An index chosen with these weights (need not sum to 1). */
  weighted(weights: readonly number[]): number {
    let total = 0;
    for (const weight of weights) total += weight;
    let pick = this.next() * total;
    for (let i = 0; i < weights.length; i++) {
      pick -= weights[i] as number;
      if (pick < 0) return i;
    }
    return weights.length - 1;
  }
}
