/**
 * The figure docs/aws.md and README.md give for the file every Lambda@Edge cold start loads is
 * what the build prints today, built as docs/aws.md says (the seed policy, one region, secrets of
 * 64 hex digits). Within 0.5%: the secrets are random, and a figure that drifts further is no
 * longer the truth.
 */
import { spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";

const out = mkdtempSync(join(tmpdir(), "edgelimit-bundle-size-"));
afterAll(() => rmSync(out, { recursive: true, force: true }));

/** The first number written like `64,716` after `marker` in `file`. */
function figureIn(file: string, marker: string): number {
  const text = readFileSync(file, "utf8").replace(/\s+/g, " ");
  const escaped = marker.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
  const match = new RegExp(`${escaped}\\D*?([\\d,]{5,})`).exec(text);
  if (match === null) throw new Error(`${file} has no figure after "${marker}"`);
  return Number((match[1] as string).replaceAll(",", ""));
}

describe("the Lambda@Edge bundle's documented size", () => {
  it("is what `edgelimit build lambda-edge` prints for the seed policy", () => {
    const result = spawnSync(
      process.execPath,
      [
        "dist/cli/main.js",
        "build",
        "lambda-edge",
        "--policy",
        "examples/policies/cloudfront.yaml",
        "--store",
        "dynamodb://rate-limits?region=us-east-1",
        "--out",
        out,
      ],
      {
        encoding: "utf8",
        env: {
          ...process.env,
          EDGELIMIT_JWT_SECRET: randomBytes(32).toString("hex"),
          EDGELIMIT_CHALLENGE_SECRET: randomBytes(32).toString("hex"),
        },
      },
    );
    expect(result.status, result.stderr).toBe(0);
    const printed = /viewer-request: .*\((\d+) bytes minified loaded at cold start/.exec(
      result.stdout,
    );
    const built = Number(printed?.[1]);
    expect(built).toBeGreaterThan(0);
    for (const [file, marker] of [
      ["docs/aws.md", "The viewer-request `index.js` of the seed policy is"],
      ["README.md", "Lambda@Edge viewer-request file loaded at cold start |"],
    ] as const) {
      const documented = figureIn(file, marker);
      expect(
        Math.abs(documented - built) / built,
        `${file} says ${documented} bytes; the build prints ${built}`,
      ).toBeLessThanOrEqual(0.005);
    }
  }, 60_000);
});
