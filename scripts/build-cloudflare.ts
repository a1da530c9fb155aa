/**
 * Builds the example Worker: resolves the policy here, in Node (YAML, zod and node:fs never reach
 * the Worker), and bundles it as JSON with the Worker source into one ESM file.
 *
 *   npm run build:cloudflare [-- --policy FILE --entry FILE --outfile FILE --minify --analyze]
 *
 * `--analyze` prints what the bundle holds, file by file (esbuild's analysis of its metafile).
 */
import { resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { analyzeMetafile, build, type Metafile } from "esbuild";
import { assertCloudflarePolicy } from "../src/adapters/cloudflare/handler.js";
import { loadPolicy } from "../src/policy/load.js";
import type { ResolvedPolicy } from "../src/policy/types.js";

const ROOT = resolve(fileURLToPath(import.meta.url), "../..");

export const EXAMPLE_ENTRY = resolve(ROOT, "examples/cloudflare/src/worker.ts");
export const EXAMPLE_POLICY = resolve(ROOT, "examples/policies/workers.yaml");
export const EXAMPLE_OUTFILE = resolve(ROOT, "examples/cloudflare/dist/worker.js");

export interface BuildWorkerOptions {
  /** A resolved policy, or a policy file to load. */
  readonly policy: ResolvedPolicy | string;
  readonly entry: string;
  readonly outfile: string;
  readonly minify?: boolean;
}

export interface BuiltWorker {
  readonly outfile: string;
  readonly bytes: number;
  /** esbuild's account of which input went where, for `--analyze`. */
  readonly metafile: Metafile;
}

/** The entry reads the policy from the global `EDGELIMIT_POLICY`, replaced here by its JSON. */
export async function buildCloudflareWorker(options: BuildWorkerOptions): Promise<BuiltWorker> {
  const policy = typeof options.policy === "string" ? loadPolicy(options.policy) : options.policy;
  assertCloudflarePolicy(policy);
  return bundleWorker(options.entry, options.outfile, {
    define: { EDGELIMIT_POLICY: JSON.stringify(policy) },
    minify: options.minify ?? false,
  });
}

/**
 * Bundles a Worker entry for workerd as the build above does (the tests' own Workers too, so
 * that they run what users deploy): one ESM file, `cloudflare:` and `node:` imports left to the
 * runtime, `define` replacing globals.
 */
export async function bundleWorker(
  entry: string,
  outfile: string,
  options: { readonly define?: Record<string, string>; readonly minify?: boolean } = {},
): Promise<BuiltWorker> {
  const result = await build({
    entryPoints: [entry],
    outfile,
    bundle: true,
    format: "esm",
    platform: "browser",
    target: "es2022",
    conditions: ["workerd", "worker", "browser"],
    mainFields: ["browser", "module", "main"],
    external: ["cloudflare:*", "node:*"],
    define: options.define ?? {},
    minify: options.minify ?? false,
    legalComments: "none",
    metafile: true,
    logLevel: "warning",
  });
  const output = Object.values(result.metafile.outputs)[0];
  return { outfile, bytes: output?.bytes ?? 0, metafile: result.metafile };
}

async function main(argv: string[]): Promise<number> {
  const option = (name: string): string | undefined => {
    const at = argv.indexOf(`--${name}`);
    return at === -1 ? undefined : argv[at + 1];
  };
  const built = await buildCloudflareWorker({
    policy: option("policy") ?? EXAMPLE_POLICY,
    entry: option("entry") ?? EXAMPLE_ENTRY,
    outfile: option("outfile") ?? EXAMPLE_OUTFILE,
    minify: argv.includes("--minify"),
  });
  console.log(`built ${built.outfile} (${(built.bytes / 1024).toFixed(1)} KiB)`);
  if (argv.includes("--analyze")) console.log(await analyzeMetafile(built.metafile));
  return 0;
}

if (process.argv[1] !== undefined && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  main(process.argv.slice(2)).then(
    (code) => {
      process.exitCode = code;
    },
    (error: unknown) => {
      console.error(error instanceof Error ? error.message : error);
      process.exitCode = 1;
    },
  );
}
