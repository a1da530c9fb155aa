/**
 * The simulator's discrete-event loop: virtual time, a binary heap ordered by (time, sequence),
 * cancellable timers, and a `Scheduler` for the decision budget on the same virtual time.
 *
 * The real limiter and store code runs on promises, so before the loop moves time on it drains
 * every microtask: a continuation then runs at the virtual time its cause happened. Draining
 * is `await new Promise(setImmediate)` (a macrotask runs only once the microtask queue is
 * empty, whatever its depth), a turn of the real event loop each time. So the
 * loop drains once per virtual instant, not once per event, and not at all after an instant
 * whose events all said `quiet()`: they queued no microtask (an arrival the limiter decided
 * synchronously, a store call arriving at its replica, which only schedules its reply), and
 * skips cancelled timers without a drain. `bench/simulate.bench.ts` measures the choice: it
 * prints events, drains and wall time with a drain after every event and as here. Nothing here
 * reads the wall clock.
 */
import type { Scheduler } from "../core/deadline.js";

interface Event {
  readonly time: number;
  readonly seq: number;
  callback: (() => void) | undefined;
}

/** How often `run` reports its progress, in virtual instants. */
const PROGRESS_INSTANTS = 4096;

export class EventLoop {
  #now = 0;
  #seq = 0;
  readonly #heap: Event[] = [];
  /** Events run and microtask drains done, for the benchmark. */
  events = 0;
  drains = 0;
  readonly scheduler: Scheduler;
  /** `instant` (default): one drain per virtual instant; `event`: one per event (the benchmark's baseline). */
  readonly #drainEach: "instant" | "event";
  #quiet = false;

  constructor(options: { readonly drainEach?: "instant" | "event" } = {}) {
    this.#drainEach = options.drainEach ?? "instant";
    this.scheduler = {
      now: () => this.#now,
      setTimeout: (callback, ms) => this.after(ms, callback),
      clearTimeout: (handle) => this.cancel(handle as Event | undefined),
      afterPendingIo: (callback) => {
        this.at(this.#now, callback);
      },
    };
  }

  /** Virtual milliseconds since the simulation started. */
  get now(): number {
    return this.#now;
  }

  at(time: number, callback: () => void): Event {
    const event: Event = { time: Math.max(time, this.#now), seq: this.#seq++, callback };
    const heap = this.#heap;
    heap.push(event);
    let i = heap.length - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      const above = heap[parent] as Event;
      if (before(above, event)) break;
      heap[i] = above;
      i = parent;
    }
    heap[i] = event;
    return event;
  }

  after(ms: number, callback: () => void): Event {
    return this.at(this.#now + Math.max(0, ms), callback);
  }

  /**
   * Says that the event now running queued no microtask (it resolved no promise and started no
   * asynchronous call), so the loop need not drain for it.
   */
  quiet(): void {
    this.#quiet = true;
  }

  /** A cancelled event stays in the heap and is skipped when its time comes. */
  cancel(event: Event | undefined): void {
    if (event !== undefined) event.callback = undefined;
  }

  /**
   * Runs events until none is left at or before `until`; time ends at `until`. `progress`, if
   * given, is told the virtual time every PROGRESS_INSTANTS instants (a display; it must not
   * touch the simulation).
   */
  async run(until: number, progress?: (now: number) => void): Promise<void> {
    const heap = this.#heap;
    let instants = 0;
    for (;;) {
      // Cancelled timers (most budget timers: their store answered) cost no drain.
      while (heap.length > 0 && (heap[0] as Event).callback === undefined) this.#pop();
      const next = heap[0];
      if (next === undefined || next.time > until) break;
      this.#now = next.time;
      if (progress !== undefined && ++instants % PROGRESS_INSTANTS === 0) progress(this.#now);
      // Every event of this instant, then one drain of the microtasks they queued, if any did.
      let noisy = false;
      while (heap.length > 0 && (heap[0] as Event).time === this.#now) {
        const event = this.#pop();
        const callback = event.callback;
        if (callback === undefined) continue;
        event.callback = undefined;
        this.events++;
        this.#quiet = false;
        callback();
        if (!this.#quiet) noisy = true;
        if (this.#drainEach === "event") {
          noisy = true;
          break;
        }
      }
      if (noisy) {
        this.drains++;
        await new Promise(setImmediate);
      }
    }
    this.#now = Math.max(this.#now, until);
  }

  #pop(): Event {
    const heap = this.#heap;
    const top = heap[0] as Event;
    const last = heap.pop() as Event;
    if (heap.length > 0) {
      let i = 0;
      const n = heap.length;
      for (;;) {
        const left = 2 * i + 1;
        if (left >= n) break;
        const right = left + 1;
        let child = left;
        if (right < n && before(heap[right] as Event, heap[left] as Event)) child = right;
        if (before(last, heap[child] as Event)) break;
        heap[i] = heap[child] as Event;
        i = child;
      }
      heap[i] = last;
    }
    return top;
  }
}

function before(a: Event, b: Event): boolean {
  return a.time < b.time || (a.time === b.time && a.seq < b.seq);
}
