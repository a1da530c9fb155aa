import { defineConfig } from "vitest/config";

/**
 * Files that each run alone, one after another, after every other file: the one that loads the
 * machine on purpose (`test/support/cpu-contention.ts`) and asserts what our processes do under
 * exactly that load (beside another file's CPU-bound work its contention would be twice what it
 * sets up), and those whose bounds are a few milliseconds (a stalled store answered within the
 * budget, a late reply, the server's clock estimated within its samples' round trips), which
 * another file running beside them would stretch: with two files at a time, the clock-skew
 * test's estimate once came out 2 ms early.
 */
const ALONE = [
  "test/redis/burst.test.ts",
  "test/redis/stall.test.ts",
  "test/redis/lag.test.ts",
  "test/redis/hybrid-clock-skew.test.ts",
];

const shared = {
  testTimeout: 30_000,
  hookTimeout: 60_000,
  pool: "forks",
  // One `npm pack` a run for the files that install the packed package (test/package/packed.ts).
  globalSetup: ["test/support/pack-dir.ts"],
} as const;

export default defineConfig({
  test: {
    // Two files at a time on this 2-core machine (vitest's default is one): most files wait on
    // servers, browsers and timers more than they compute. A clean-clone CI run took 9 min 34 s
    // and 10 min 13 s with one at a time (vitest 510 and 546 s), vitest 300 s with two, every
    // test passing; the files in ALONE still run alone, after them.
    maxWorkers: 2,
    projects: [
      {
        test: {
          ...shared,
          name: "tests",
          include: ["test/**/*.test.ts"],
          exclude: ALONE,
          sequence: { groupOrder: 0 },
        },
      },
      // A group of its own for each: groups run one after another.
      ...ALONE.map((file, i) => ({
        test: { ...shared, name: `alone-${i + 1}`, include: [file], sequence: { groupOrder: i + 1 } },
      })),
    ],
  },
});
