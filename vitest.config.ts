import { defineConfig } from "vitest/config";

/**
 * Tests that load the machine on purpose (`test/support/cpu-contention.ts`) and assert what our
 * processes do under exactly that load run in a group of their own, after every other file:
 * beside another file's CPU-bound work (the simulator's scenarios), their contention would be
 * twice what they set up.
 */
const ALONE = ["test/redis/burst.test.ts"];

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
    // test passing; the file that loads the machine on purpose still runs alone, after them.
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
      {
        test: { ...shared, name: "under-contention", include: ALONE, sequence: { groupOrder: 1 } },
      },
    ],
  },
});
