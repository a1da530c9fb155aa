/**
 * The Redis server's clock, as this process estimates it: what the blind fixed-window path
 * (fixed-windows.ts) names a window's key by when the store counts with the server's clock, so
 * that processes whose own clocks disagree still agree on windows without a `TIME` per call.
 *
 * A sample is a `TIME` call: the server's time is taken as it was halfway through the round trip,
 * so the estimate is off by at most half that round trip (a fraction of a millisecond on a LAN).
 * It runs on the monotonic clock from then on (a wall clock stepped on this machine moves
 * nothing), and is taken again in the background once it is `RESAMPLE_MS` old; a sample with a
 * shorter round trip replaces one with a longer, a newer one an older one. A window's edge seen
 * a little early or late by one process is a request counted in the window next to it, which
 * each key's own count bounds (the store keeps windows apart).
 */
const RESAMPLE_MS = 1000;

export class ServerClock {
  readonly #time: () => Promise<readonly (string | number)[]>;
  readonly #monotonic: () => number;
  /** Server epoch ms minus the monotonic clock, from the best sample; undefined before one. */
  #offset: number | undefined;
  #sampledAt = Number.NEGATIVE_INFINITY;
  #roundTrip = Number.POSITIVE_INFINITY;
  #sampling: Promise<void> | undefined;

  constructor(
    time: () => Promise<readonly (string | number)[]>,
    monotonic: () => number = () => performance.now(),
  ) {
    this.#time = time;
    this.#monotonic = monotonic;
  }

  /** The server's time now (epoch ms), or undefined before the first sample has answered. */
  now(): number | undefined {
    const offset = this.#offset;
    if (offset === undefined) return undefined;
    const monotonic = this.#monotonic();
    if (monotonic - this.#sampledAt >= RESAMPLE_MS) this.#resample();
    return Math.floor(offset + monotonic);
  }

  /** The server's time, sampling it first when it was never sampled. */
  async at(): Promise<number> {
    const now = this.now();
    if (now !== undefined) return now;
    await this.sample();
    return this.now() as number;
  }

  /** One `TIME` round trip (shared by concurrent callers). */
  sample(): Promise<void> {
    if (this.#sampling !== undefined) return this.#sampling;
    const sent = this.#monotonic();
    const done = (): void => {
      this.#sampling = undefined;
    };
    this.#sampling = this.#time().then(([seconds, micros]) => {
      const received = this.#monotonic();
      const roundTrip = received - sent;
      // A stale estimate (or none) gives way to any sample; a fresh one only to a closer one.
      const stale = received - this.#sampledAt >= RESAMPLE_MS;
      if (stale || roundTrip <= this.#roundTrip) {
        const server = Number(seconds) * 1000 + Number(micros) / 1000;
        this.#offset = server - (sent + roundTrip / 2);
        this.#roundTrip = roundTrip;
        this.#sampledAt = received;
      }
    });
    this.#sampling.then(done, done);
    return this.#sampling;
  }

  #resample(): void {
    this.sample().catch(() => {
      // The last estimate stands; the next call asks again.
    });
  }
}
