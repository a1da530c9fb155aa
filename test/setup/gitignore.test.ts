/**
 * What the quick starts write into a clone stays out of git: the Worker's local secrets
 * (`.dev.vars`, which examples/cloudflare/wrangler.toml says is git-ignored), wrangler dev's
 * state, the Lambda@Edge zips of docs/aws.md's quick start (`--out build/lambda-edge`), and CDK's
 * output (`cdk.out/` in the folder `npx cdk deploy -a "npx tsx infra/app.ts"` runs from, the
 * repository's root; `infra/cdk.out/` with infra/cdk.json). Asked of git itself.
 */
import { spawnSync } from "node:child_process";
import { join } from "node:path";
import { describe, expect, it } from "vitest";

const ROOT = join(import.meta.dirname, "../..");

/** Whether git ignores `path` (tracked or not, existing or not). */
function ignored(path: string): boolean {
  const result = spawnSync("git", ["check-ignore", "--quiet", "--no-index", path], {
    cwd: ROOT,
    encoding: "utf8",
  });
  if (result.status !== 0 && result.status !== 1) {
    throw new Error(`git check-ignore ${path} failed: ${result.stderr}`);
  }
  return result.status === 0;
}

describe("the repository's .gitignore", () => {
  it("ignores what the quick starts write: local secrets, build output, CDK's output", () => {
    const written = [
      "examples/cloudflare/.dev.vars",
      "examples/cloudflare/.wrangler/state/v3/do/x.sqlite",
      "examples/cloudflare/dist/worker.js",
      "build/lambda-edge/viewer-request.zip",
      "build/lambda-edge/manifest.json",
      "cdk.out/manifest.json",
      "infra/cdk.out/manifest.json",
    ];
    expect(written.filter((path) => !ignored(path))).toEqual([]);
  });

  it("keeps the sources beside them", () => {
    const sources = [
      "examples/cloudflare/wrangler.toml",
      "examples/cloudflare/src/worker.ts",
      "infra/app.ts",
      "infra/cdk.json",
      "src/cli/build.ts",
      "scripts/build-cloudflare.ts",
    ];
    expect(sources.filter((path) => ignored(path))).toEqual([]);
  });
});
