import { execFileSync } from "node:child_process";
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, normalize, posix } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { pack, ROOT } from "./packed.js";

/**
 * What the published tarball holds: the license, the README and the docs it links to, the built
 * code, and nothing that points at a file left out (a source map's `src/`, a doc's link).
 */

let work: string;
let unpacked: string;
let files: Set<string>;
let packedTarball: string;

beforeAll(() => {
  work = mkdtempSync(join(tmpdir(), "edgelimit-contents-"));
  const packed = pack(work);
  files = new Set(packed.files.map((file) => file.path));
  packedTarball = packed.tarball;
  unpacked = join(work, "package");
  mkdirSync(unpacked);
  execFileSync("tar", ["-xzf", packed.tarball, "-C", unpacked, "--strip-components=1"]);
}, 60_000);

afterAll(() => {
  if (work !== undefined) rmSync(work, { recursive: true, force: true });
});

const shipped = (path: string) => files.has(posix.normalize(path));
const read = (path: string) => readFileSync(join(unpacked, path), "utf8");

describe("the packed tarball", () => {
  it("holds LICENSE, README.md, package.json, every docs/*.md and dist/", () => {
    for (const path of ["LICENSE", "README.md", "package.json", "dist/index.js", "dist/index.d.ts"])
      expect(files).toContain(path);
    const docs = readdirSync(join(ROOT, "docs")).filter((name) => name.endsWith(".md"));
    expect(docs.length).toBeGreaterThan(0);
    for (const name of docs) expect(files).toContain(`docs/${name}`);
    expect(read("LICENSE")).toMatch(/^MIT License/);
  });

  it("holds every file package.json's exports and bin name", () => {
    const manifest = JSON.parse(read("package.json")) as {
      exports: Record<string, string | Record<string, string>>;
      bin: Record<string, string>;
    };
    const targets = Object.values(manifest.exports).flatMap((entry) =>
      typeof entry === "string" ? [entry] : Object.values(entry),
    );
    for (const target of [...targets, ...Object.values(manifest.bin)])
      expect(files, target).toContain(posix.normalize(target));
  });

  it("has no source map, and no sourceMappingURL, that points at a file it does not hold", () => {
    const broken: string[] = [];
    for (const path of files) {
      if (path.endsWith(".map")) {
        const map = JSON.parse(read(path)) as { sources: string[]; sourceRoot?: string };
        for (const source of map.sources) {
          const target = posix.join(posix.dirname(path), map.sourceRoot ?? "", source);
          if (!shipped(target)) broken.push(`${path} -> ${target}`);
        }
      } else if (path.endsWith(".js")) {
        const url = /^\/\/# sourceMappingURL=(\S+)\s*$/m.exec(read(path))?.[1];
        if (url !== undefined && !url.startsWith("data:")) {
          const target = posix.join(posix.dirname(path), url);
          if (!shipped(target)) broken.push(`${path} -> ${target}`);
        }
      }
    }
    expect(broken).toEqual([]);
  });

  it("has no relative link in its Markdown that points at a file it does not hold", () => {
    const broken: string[] = [];
    for (const path of files) {
      if (!path.endsWith(".md")) continue;
      // Inline links and images outside code spans: [text](target) with a relative target.
      const text = read(path)
        .replace(/```[\s\S]*?```/g, "")
        .replace(/`[^`\n]*`/g, "");
      for (const match of text.matchAll(/\]\(([^)\s]+)\)/g)) {
        const target = match[1] as string;
        if (/^[a-z][a-z0-9+.-]*:/i.test(target) || target.startsWith("#")) continue;
        const file = normalize(join(dirname(path), target.split("#")[0] as string));
        if (!shipped(file) && !existsSync(join(unpacked, file)))
          broken.push(`${path} -> ${target}`);
      }
    }
    expect(broken).toEqual([]);
  });

  it("runs no script when installed: no prepare, preinstall, install or postinstall", () => {
    // npm runs a dependency's prepare only from git, but warns about it for every install.
    const manifest = JSON.parse(read("package.json")) as { scripts?: Record<string, string> };
    const runOnInstall = ["preinstall", "install", "postinstall", "prepare"].filter(
      (name) => manifest.scripts?.[name] !== undefined,
    );
    expect(runOnInstall).toEqual([]);
  });

  it("ships the CLI executable, as the build writes it (npx edgelimit runs it by its name)", () => {
    const listing = execFileSync("tar", ["-tvzf", packedTarball], { encoding: "utf8" });
    const line = listing.split("\n").find((entry) => entry.endsWith(" package/dist/cli/main.js"));
    expect(line).toMatch(/^-rwxr-xr-x /);
    // The build's own output, run by its path as npx runs a bin: no "Permission denied".
    expect(statSync(join(ROOT, "dist/cli/main.js")).mode & 0o111).toBe(0o111);
    const version = execFileSync(join(ROOT, "dist/cli/main.js"), ["--version"], {
      encoding: "utf8",
    });
    expect(version.trim()).toBe(JSON.parse(read("package.json")).version);
  });
});
