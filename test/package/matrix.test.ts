import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { NEXT_COMPILER_OPTIONS } from "../support/nextjs.js";
import { ENTRY_POINTS } from "./entry-points.js";
import { install, pack, ROOT } from "./packed.js";

/**
 * The packaging matrix (after express-rate-limit's): the packed tarball, installed into a fresh
 * project, used by package name from ESM and CommonJS, in JavaScript and in TypeScript. Each
 * consumer loads every entry point and names a few of its exports; a missing export is a
 * runtime failure in JavaScript and a type error in TypeScript.
 */

const TSC = join(ROOT, "node_modules", ".bin", "tsc");
/**
 * TypeScript 5, as most projects still compile with: 7 no longer knows `moduleResolution: node`
 * (node10), which Next.js projects created before its 13.4 still carry, and resolves without
 * `exports` under it (`types`, `typesVersions`).
 */
const TSC5 = join(ROOT, "node_modules", "typescript5", "bin", "tsc");
const entries = Object.entries(ENTRY_POINTS);
/** tsc over every entry point's types takes 10-15 s alone here, and several times that under load. */
const TYPECHECK_TIMEOUT_MS = 120_000;

let work: string;
let project: string;

beforeAll(() => {
  work = mkdtempSync(join(tmpdir(), "edgelimit-matrix-"));
  project = join(work, "project");
  const { tarball } = pack(work);
  install(tarball, project, ["@types/node"]);
  // What `npm init -y` writes: a CommonJS project.
  writeFileSync(
    join(project, "package.json"),
    `${JSON.stringify({ name: "consumer", version: "1.0.0", type: "commonjs" }, null, 2)}\n`,
  );
}, 60_000);

afterAll(() => {
  if (work !== undefined) rmSync(work, { recursive: true, force: true });
});

/** A script that loads every entry point and prints the promised names it lacks. */
function jsConsumer(style: "import" | "require"): string {
  const lines = entries.map(([specifier], i) =>
    style === "import"
      ? `import * as m${i} from ${JSON.stringify(specifier)};`
      : `const m${i} = require(${JSON.stringify(specifier)});`,
  );
  const checks = entries.map(
    ([specifier, names], i) =>
      `  [${JSON.stringify(specifier)}]: ${JSON.stringify(names)}.filter((name) => typeof m${i}[name] !== "function"),`,
  );
  return `${lines.join("\n")}\nconsole.log(JSON.stringify({\n${checks.join("\n")}\n}));\n`;
}

function runNode(file: string) {
  const result = spawnSync(process.execPath, [file], { cwd: project, encoding: "utf8" });
  return { status: result.status, stderr: result.stderr, stdout: result.stdout };
}

function expectAllNames(file: string): void {
  const result = runNode(file);
  expect(result.stderr).toBe("");
  expect(result.status).toBe(0);
  const missing = JSON.parse(result.stdout) as Record<string, string[]>;
  expect(missing).toEqual(Object.fromEntries(entries.map(([specifier]) => [specifier, []])));
}

/** A TypeScript file that imports every promised name of every entry point. */
function tsConsumer(): string {
  const imports = entries.map(
    ([specifier, names], i) =>
      `import { ${names.map((name) => `${name} as e${i}_${name}`).join(", ")} } from ${JSON.stringify(specifier)};`,
  );
  const used = entries.flatMap(([, names], i) => names.map((name) => `e${i}_${name}`));
  return `${imports.join("\n")}\n\nexport const used: unknown[] = [${used.join(", ")}];\n`;
}

function typecheck(
  dir: string,
  files: string[],
  module: string,
  moduleResolution: string,
  tsc = TSC,
  compilerOptions: Record<string, unknown> = {
    target: "ES2022",
    strict: true,
    noEmit: true,
    types: ["node"],
  },
) {
  writeFileSync(
    join(dir, "tsconfig.json"),
    JSON.stringify({ compilerOptions: { ...compilerOptions, module, moduleResolution }, files }),
  );
  const result = spawnSync(tsc, ["-p", join(dir, "tsconfig.json")], {
    cwd: dir,
    encoding: "utf8",
  });
  return { status: result.status, output: `${result.stdout}${result.stderr}` };
}

describe("the packed package, installed and used by name", () => {
  it("ESM JavaScript: import from a .mjs file", () => {
    writeFileSync(join(project, "consumer.mjs"), jsConsumer("import"));
    expectAllNames(join(project, "consumer.mjs"));
  });

  it("CommonJS JavaScript: require from a .cjs file", () => {
    writeFileSync(join(project, "consumer.cjs"), jsConsumer("require"));
    expectAllNames(join(project, "consumer.cjs"));
  });

  it('CommonJS JavaScript: require from a .js file in a "type": "commonjs" project', () => {
    writeFileSync(join(project, "consumer.js"), jsConsumer("require"));
    expectAllNames(join(project, "consumer.js"));
  });

  // `module: node20` or `nodenext` model a Node that can require() an ES module; `node16` and
  // `node18` model one that cannot, and rightly refuse the .cts import (TS1479).
  for (const [module, moduleResolution] of [
    ["nodenext", "nodenext"],
    ["node20", "node16"],
  ] as const) {
    it(
      `ESM and CommonJS TypeScript: a .mts, a .cts and a .ts of a CommonJS project typecheck (module ${module}, moduleResolution ${moduleResolution})`,
      () => {
        const dir = join(project, `ts-${module}`);
        mkdirSync(dir, { recursive: true });
        const source = tsConsumer();
        writeFileSync(join(dir, "consumer.mts"), source);
        writeFileSync(join(dir, "consumer.cts"), source);
        writeFileSync(join(dir, "consumer.ts"), source); // CommonJS: the project says "type": "commonjs"
        const files = ["consumer.mts", "consumer.cts", "consumer.ts"];
        const result = typecheck(dir, files, module, moduleResolution);
        expect(result.output).toBe("");
        expect(result.status).toBe(0);
      },
      TYPECHECK_TIMEOUT_MS,
    );
  }

  // The compiler options `create-next-app` writes (`next build` typechecks with them): with
  // `moduleResolution: node` (node10), TypeScript ignores `exports`; `bundler` reads it.
  for (const [moduleResolution, tsc, version] of [
    ["node", TSC5, "5"],
    ["bundler", TSC5, "5"],
    ["bundler", TSC, "7"],
  ] as const) {
    it(
      `TypeScript ${version} in a Next.js project: a .ts file typechecks (module esnext, moduleResolution ${moduleResolution})`,
      () => {
        const dir = join(project, `ts-next-${moduleResolution}-${version}`);
        mkdirSync(dir, { recursive: true });
        writeFileSync(join(dir, "middleware.ts"), tsConsumer());
        const result = typecheck(
          dir,
          ["middleware.ts"],
          "esnext",
          moduleResolution,
          tsc,
          NEXT_COMPILER_OPTIONS,
        );
        expect(result.output).toBe("");
        expect(result.status).toBe(0);
      },
      TYPECHECK_TIMEOUT_MS,
    );
  }
});
