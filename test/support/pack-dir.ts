/**
 * Global setup: a directory for this run's `npm pack` (test/package/packed.ts). The first test
 * file that packs writes the tarball there and the others copy it, instead of each packing the
 * same tree again (some 2 s each); the directory goes when the run ends.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { TestProject } from "vitest/node";

declare module "vitest" {
  export interface ProvidedContext {
    /** Where this run keeps its packed tarball, once a test file has packed. */
    packDir: string;
  }
}

export default function setup(project: TestProject): () => void {
  const dir = mkdtempSync(join(tmpdir(), "edgelimit-pack-run-"));
  project.provide("packDir", dir);
  return () => rmSync(dir, { recursive: true, force: true });
}
