import { spawnSync } from "node:child_process";
import { describe, expect, it } from "vitest";
import { ENTRY_POINTS } from "./entry-points.js";

/**
 * Every entry point of package.json `exports` resolves, from the built `dist/`, by its public
 * name (`npm test` builds first), and carries the names the docs promise.
 */

describe("package entry points", () => {
  for (const [specifier, names] of Object.entries(ENTRY_POINTS)) {
    it(`${specifier} exports ${names.join(", ")}`, () => {
      // A plain Node process, outside vitest's resolver: what a user's `import` gets.
      const script = `const m = await import(${JSON.stringify(specifier)}); console.log(JSON.stringify(Object.keys(m)));`;
      const result = spawnSync(process.execPath, ["--input-type=module", "-e", script], {
        encoding: "utf8",
      });
      expect(result.stderr).toBe("");
      const exported = JSON.parse(result.stdout) as string[];
      for (const name of names) expect(exported).toContain(name);
    });
  }

  it("installs the edgelimit command", () => {
    const result = spawnSync(process.execPath, ["dist/cli/main.js", "--version"], {
      encoding: "utf8",
    });
    expect(result.status).toBe(0);
    expect(result.stdout.trim()).toMatch(/^\d+\.\d+\.\d+/);
  });
});
