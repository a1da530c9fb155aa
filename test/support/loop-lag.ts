/**
 * How long a call took, and how much of that this process could not run at all: the event-loop
 * delays seen meanwhile, added up (each time a timer of `resolution` ms fired late, from our own
 * work or from the machine giving the CPU to other processes). A test that bounds what a
 * failing store costs a decision checks `ms - lagMs`: on a quiet machine lag is about zero and
 * the bound is the plain wall time; on a machine shared by six suites the store is not blamed
 * for the time we were not scheduled (as the decision budget itself does, core/deadline.ts).
 * Added up, not the longest: a decision that waits out its budget and then counts locally can
 * be descheduled more than once, and taking off only the longest stall would leave the others
 * in the store's time.
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
  let stalled = 0;
  const tick = (): void => {
    const now = performance.now();
    // A tick is normally up to a millisecond or two late; over a 200 ms call that jitter alone
    // would add up to tens of milliseconds. Only a delay longer than the resolution is a stall.
    const late = now - last - resolution;
    if (late > resolution) stalled += late;
    last = now;
  };
  const timer = setInterval(tick, resolution);
  return {
    async measure(call) {
      stalled = 0;
      last = performance.now();
      const started = last;
      const value = await call();
      const ms = performance.now() - started;
      // A stall that no tick has followed yet counts too.
      tick();
      return { value, ms, lagMs: Math.min(ms, stalled) };
    },
    stop() {
      clearInterval(timer);
    },
  };
}
