/**
 * One way in, as docs/architecture.md ("Where a request enters the core") describes it: counters
 * reach a store only through the counting step (src/core/count-step.ts), whichever entry they
 * come from (the engine, rls's configuration mode, `createRateLimit`), and counts become a
 * decision only there (or in local counting, which the step falls back to). A file that calls a
 * store's counting methods is the step or a store itself: each other one is named here with why.
 */
import { readdirSync, readFileSync } from "node:fs";
import { join, relative, resolve } from "node:path";
import { describe, expect, it } from "vitest";

const SRC = resolve("src");

function sourceFiles(directory: string): string[] {
  return readdirSync(directory, { withFileTypes: true }).flatMap((entry) => {
    const path = join(directory, entry.name);
    if (entry.isDirectory()) return sourceFiles(path);
    return entry.name.endsWith(".ts") ? [path] : [];
  });
}

function filesCalling(pattern: RegExp): string[] {
  return sourceFiles(SRC)
    .filter((file) => pattern.test(readFileSync(file, "utf8")))
    .map((file) => relative(SRC, file))
    .sort();
}

/** Files that count in a store without being an entry, and why. */
const STORES: Record<string, string> = {
  "core/count-step.ts": "the counting step",
  "core/hybrid-counting.ts": "hybrid counting, a store in front of a store",
  "core/hybrid/fence.ts": "hybrid counting's reset fence, on the store it wraps",
  "core/hybrid/refill.ts": "hybrid counting's top-ups, on the store it wraps",
  "core/hybrid/reserve.ts": "hybrid counting's reservations, on the store it wraps",
  "core/hybrid/holder.ts": "hybrid counting's region holder, filled from the store it wraps",
  "core/local-fallback.ts": "local counting, the step's fallback, on its own counter",
  "adapters/cloudflare/area-object.ts":
    "a Worker's area object, the far end of the Cloudflare store: hybrid counting in front of the rule objects",
  "simulate/world.ts": "the simulator's modeled store network",
};

describe("one way into the core", () => {
  it("only the counting step and the stores call a store's counting methods", () => {
    const callers = filesCalling(/\.apply\(|applySync\??\.?\(|applyOneSync\(/);
    const unexplained = callers.filter(
      (file) => !file.startsWith("stores/") && STORES[file] === undefined,
    );
    expect(unexplained).toEqual([]);
  });

  it("only the counting step and local counting turn counts into a decision", () => {
    expect(filesCalling(/\bdecideFromCounts\(/)).toEqual([
      "core/count-step.ts",
      "core/local-fallback.ts",
      "core/outcome.ts",
    ]);
  });
});
