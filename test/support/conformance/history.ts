/**
 * What a history is (see histories.ts), and the counterexamples that shrinking found, kept as
 * fixed cases.
 */

export type Algorithm = "fixed-window" | "sliding-window" | "token-bucket";

export interface RuleShape {
  readonly algorithm: Algorithm;
  readonly limit: number;
  /** Seconds (policies take windows of 1 s or more). */
  readonly windowSeconds: number;
}

export type Step =
  | {
      readonly kind: "request";
      readonly limiter: number;
      readonly subject: number;
      /** 0: the global rule only; 1: a path rule too (two counters, one atomic call). */
      readonly path: number;
      readonly cost: number;
      readonly lateMs: number;
      readonly advanceMs: number;
    }
  | {
      /** Requests sent at once by every limiter: batched calls, reservations shared in flight. */
      readonly kind: "burst";
      readonly subject: number;
      readonly path: number;
      readonly perLimiter: number;
      readonly advanceMs: number;
    }
  | { readonly kind: "reload"; readonly global: RuleShape; readonly path: RuleShape }
  | { readonly kind: "reset"; readonly limiter: number; readonly subject: number }
  | { readonly kind: "fail"; readonly limiter: number; readonly after: boolean };

export interface History {
  /**
   * The store counts on a clock of its own, the history's time (store-clock.ts): each process's
   * clock is off from the store's by its offset. Otherwise every store call counts at its
   * caller's stamp, as a store without a clock does.
   */
  readonly storeClock?: boolean;
  /** Each process's clock, in ms ahead of the history's time (behind when negative). */
  readonly offsets: readonly number[];
  readonly global: RuleShape;
  readonly path: RuleShape;
  readonly steps: readonly Step[];
}

/** Counterexamples that shrinking found, kept as fixed cases (none pass on the old code). */
export const FIXED_HISTORIES: readonly { readonly name: string; readonly history: History }[] = [
  {
    name: "a request from the window before, after the limit was reached in the next",
    history: {
      offsets: [0, -3],
      global: { algorithm: "fixed-window", limit: 3, windowSeconds: 1 },
      path: { algorithm: "fixed-window", limit: 3, windowSeconds: 1 },
      steps: [
        // The first second starts with the limit reached by the process on time...
        ...[0, 1, 2].map((i) => request(0, { advanceMs: i === 0 ? 1000 : 1 })),
        // ...then the process 3 ms behind sends one stamped in the second before.
        request(1, {}),
        ...[0, 1, 2].map(() => request(0, { advanceMs: 1 })),
      ],
    },
  },
  {
    name: "a request counted late after another subject's request, at a newer time, swept its window's state",
    history: {
      offsets: [0, 0],
      global: { algorithm: "fixed-window", limit: 3, windowSeconds: 1 },
      path: { algorithm: "fixed-window", limit: 3, windowSeconds: 1 },
      steps: [
        request(0, { lateMs: 1 }),
        request(0, { subject: 1 }),
        request(0, { lateMs: 1 }),
        request(0, { lateMs: 1 }),
        request(0, { lateMs: 1 }),
      ],
    },
  },
  {
    name: "a process 100 ms behind the store's clock spent units held from a window the store had ended",
    history: {
      storeClock: true,
      offsets: [-100, 0],
      global: { algorithm: "fixed-window", limit: 12, windowSeconds: 1 },
      path: { algorithm: "fixed-window", limit: 12, windowSeconds: 1 },
      steps: [
        // The process behind reserves what is left of the first second, on its way to the limit...
        request(0, { advanceMs: 150 }),
        request(0, {}),
        // ...and spends it 50 ms into the next second on the store's clock (50 ms before, on its own)...
        request(0, { advanceMs: 900 }),
        request(0, {}),
        // ...while the process on time takes that second's whole limit.
        ...Array.from({ length: 12 }, () => request(1, { advanceMs: 1 })),
      ],
    },
  },
  {
    name: "a process 1 ms behind the store's clock spent a unit held from a window the store had ended",
    history: {
      storeClock: true,
      offsets: [0, -1],
      global: { algorithm: "fixed-window", limit: 3, windowSeconds: 1 },
      path: { algorithm: "fixed-window", limit: 3, windowSeconds: 1 },
      steps: [
        request(0, { advanceMs: 944 }),
        request(1, { advanceMs: 931 }),
        request(0, { subject: 1, advanceMs: 26 }),
        request(1, { advanceMs: 10 }),
        request(0, { advanceMs: 35 }),
        request(0, { advanceMs: 37 }),
        request(1, { advanceMs: 17 }),
        request(0, {}),
      ],
    },
  },
];

function request(limiter: number, extra: Partial<Extract<Step, { kind: "request" }>>): Step {
  return {
    kind: "request",
    limiter,
    subject: 0,
    path: 0,
    cost: 1,
    lateMs: 0,
    advanceMs: 0,
    ...extra,
  };
}
