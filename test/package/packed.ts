import { execFileSync } from "node:child_process";
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  realpathSync,
  renameSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { basename, dirname, join, resolve } from "node:path";
import { inject } from "vitest";

/** The repository's root (this file is test/package/packed.ts). */
export const ROOT = resolve(import.meta.dirname, "../..");

export interface PackedFile {
  path: string;
  size: number;
}

export interface Packed {
  /** Absolute path of the `.tgz`. */
  tarball: string;
  /** The files in it, relative to the package's root (`dist/index.js`, `LICENSE`, ...). */
  files: PackedFile[];
}

/**
 * `npm pack` of the tree as it is, into `dir`. Scripts are skipped (`prepare` would rebuild
 * `dist/` under the other test files that read it): the tarball holds the `dist/` of the last
 * `npm run build`, which `npm test` runs first. The tree is packed once a run (nothing rebuilds
 * `dist/` during one): the first file packs into the run's directory (test/support/pack-dir.ts),
 * the others copy that tarball into `dir`.
 */
export function pack(dir: string): Packed {
  const runDir = inject("packDir");
  if (runDir === undefined) return npmPack(dir);
  const record = join(runDir, "packed.json");
  let packed: Packed;
  if (existsSync(record)) {
    packed = JSON.parse(readFileSync(record, "utf8")) as Packed;
  } else {
    // A directory of its own, and the record renamed into place: two files packing at once
    // (with more than one worker) each write whole files, and either record is right.
    packed = npmPack(mkdtempSync(join(runDir, "pack-")));
    writeFileSync(`${record}.${process.pid}`, JSON.stringify(packed));
    renameSync(`${record}.${process.pid}`, record);
  }
  const tarball = join(dir, basename(packed.tarball));
  copyFileSync(packed.tarball, tarball);
  return { tarball, files: packed.files };
}

function npmPack(dir: string): Packed {
  const out = execFileSync(
    "npm",
    ["pack", "--ignore-scripts", "--json", "--silent", "--pack-destination", dir],
    { cwd: ROOT, encoding: "utf8" },
  );
  const [result] = JSON.parse(out) as { filename: string; files: PackedFile[] }[];
  if (result === undefined) throw new Error(`npm pack printed no result: ${out}`);
  return { tarball: join(dir, result.filename), files: result.files };
}

/**
 * The tarball installed into `<project>/node_modules/edgelimit` without the registry: extracted,
 * and each of its dependencies a symlink to the repository's installed copy (Node and TypeScript
 * follow the link, so the dependencies' own dependencies resolve from there), and the optional
 * peers unless `optionalPeers: false`. `extra` names packages a consumer would add itself, such
 * as `@types/node`.
 */
export function install(
  tarball: string,
  project: string,
  extra: string[] = [],
  options: { readonly optionalPeers?: boolean } = {},
): void {
  const target = join(project, "node_modules", "edgelimit");
  mkdirSync(target, { recursive: true });
  execFileSync("tar", ["-xzf", tarball, "-C", target, "--strip-components=1"]);
  const manifest = JSON.parse(readFileSync(join(target, "package.json"), "utf8")) as {
    dependencies?: Record<string, string>;
    peerDependencies?: Record<string, string>;
  };
  // The optional peers (ioredis, pino, ...) as a user of every edition would add them.
  const peers = options.optionalPeers === false ? [] : Object.keys(manifest.peerDependencies ?? {});
  for (const name of [...Object.keys(manifest.dependencies ?? {}), ...peers, ...extra]) {
    const link = join(project, "node_modules", name);
    mkdirSync(dirname(link), { recursive: true });
    symlinkSync(realpathSync(join(ROOT, "node_modules", name)), link, "dir");
  }
}
