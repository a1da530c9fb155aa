import { join } from "node:path";
import { build, type Metafile, type Plugin } from "esbuild";
import { Miniflare } from "miniflare";

/**
 * Bundles `entry` the way edge runtimes bundle code (esbuild, browser platform, ESM: `node:`
 * imports cannot resolve) into `dir`, and returns the packages that went into the output and
 * every file the bundler read (the module graph, before tree shaking drops what is unused).
 */
export async function bundleForEdge(
  entry: string,
  dir: string,
  options: {
    readonly conditions?: string[];
    readonly plugins?: Plugin[];
    /** Replacements, as esbuild's `define` (Next.js gives middleware a `process.env`). */
    readonly define?: Record<string, string>;
  } = {},
): Promise<{ outfile: string; nodeBuiltins: string[]; packages: string[]; inputs: string[] }> {
  const outfile = join(dir, "bundle.mjs");
  const result = await build({
    entryPoints: [entry],
    bundle: true,
    platform: "browser",
    format: "esm",
    minify: true,
    outfile,
    logLevel: "silent",
    metafile: true,
    ...(options.conditions === undefined ? {} : { conditions: options.conditions }),
    ...(options.plugins === undefined ? {} : { plugins: options.plugins }),
    ...(options.define === undefined ? {} : { define: options.define }),
  });
  return {
    outfile,
    nodeBuiltins: Object.keys(result.metafile.inputs).filter((input) => input.startsWith("node:")),
    packages: packagesInOutput(result.metafile),
    inputs: Object.keys(result.metafile.inputs),
  };
}

/** The npm packages that contributed bytes to the output (the inputs list every file read). */
function packagesInOutput(metafile: Metafile): string[] {
  const [output] = Object.values(metafile.outputs);
  const packages = Object.entries(output?.inputs ?? {})
    .filter(([input, used]) => input.includes("node_modules/") && used.bytesInOutput > 0)
    .map(([input]) => input.split("node_modules/").pop()?.split("/")[0] as string);
  return [...new Set(packages)].sort();
}

/** The bundle running in workerd (Miniflare), with text `bindings`; dispose it when done. */
export async function runInWorkerd(
  outfile: string,
  dir: string,
  bindings: Record<string, string> = {},
): Promise<Miniflare> {
  const miniflare = new Miniflare({
    modules: true,
    scriptPath: outfile,
    // Module names are relative to this root: the bundle's own folder.
    modulesRoot: dir,
    compatibilityDate: "2025-06-01",
    bindings,
  });
  await miniflare.ready;
  return miniflare;
}
