/**
 * How long a call took, and how much of that this process could not run at all: the longest
 * event-loop delay seen meanwhile (a timer of `resolution` ms that fired late, from our own
 * work or from the machine giving the CPU to other processes). A test that bounds what a
 * failing store costs a decision checks `ms - lagMs`: on a quiet machine lag is about zero and
 * the bound is the plain wall time; on a machine shared by six suites the store is not blamed
 * for the time we were not scheduled (as the decision budget itself does, core/deadline.ts).
 */
export interface Timed<T> {
  readonly value: T;
  readonly ms: number;
  readonly lagMs: number;
}

export interface LagMonitor {
  measure<T>(call: () => Promise<T>): Promise<Timed<T>>;
  stop(): void;
}

export function lagMonitor(resolution = 5): LagMonitor {
  let last = performance.now();
  let worst = 0;
  const tick = (): void => {
    const now = performance.now();
    worst = Math.max(worst, now - last - resolution);
    last = now;
  };
  const timer = setInterval(tick, resolution);
  return {
    async measure(call) {
      worst = 0;
      last = performance.now();
      const started = last;
      const value = await call();
      const ms = performance.now() - started;
      // A stall that no tick has followed yet counts too.
      tick();
      return { value, ms, lagMs: Math.max(0, worst) };
    },
    stop() {
      clearInterval(timer);
    },
  };
}
