/**
 * The figure docs/cloudflare.md gives for the example Worker is what `npm run build:cloudflare`
 * prints today (within 3%: a figure that drifts further is no longer the truth).
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";

const out = mkdtempSync(join(tmpdir(), "edgelimit-worker-size-"));
afterAll(() => rmSync(out, { recursive: true, force: true }));

describe("the example Worker's documented size", () => {
  it("is what npm run build:cloudflare prints", () => {
    const result = spawnSync(
      process.execPath,
      ["--import", "tsx", "scripts/build-cloudflare.ts", "--outfile", join(out, "worker.js")],
      { encoding: "utf8" },
    );
    expect(result.status, result.stderr).toBe(0);
    const built = Number(/\((\d+(?:\.\d+)?) KiB\)/.exec(result.stdout)?.[1]);
    expect(built).toBeGreaterThan(0);
    const docs = readFileSync("docs/cloudflare.md", "utf8").replace(/\s+/g, " ");
    const stated = [...docs.matchAll(/(\d+(?:\.\d+)?) KiB unminified/g)].map((m) => Number(m[1]));
    expect(stated.length).toBeGreaterThan(0);
    for (const documented of stated) {
      expect(
        Math.abs(documented - built) / built,
        `docs/cloudflare.md says ${documented} KiB; the build prints ${built} KiB`,
      ).toBeLessThanOrEqual(0.03);
    }
  }, 60_000);
});
