/**
 * The entry points of package.json `exports`, each read from the sources its built file comes
 * from, and what the table's calls share: a policy, a store, a limiter.
 */
import { readFileSync } from "node:fs";
import { definePolicy } from "../../../src/policy/load.js";
import { memoryStore } from "../../../src/stores/memory.js";

// biome-ignore lint/suspicious/noExplicitAny: the table calls as plain JavaScript does.
export type Loose = any;

const manifest = JSON.parse(readFileSync("package.json", "utf8")) as {
  exports: Record<string, string | { default: string }>;
};

/** Each entry point's module by the name a user imports it by (`edgelimit/node`). */
export const modules: Record<string, Record<string, Loose>> = {};
for (const [subpath, target] of Object.entries(manifest.exports)) {
  const built = typeof target === "string" ? target : target.default;
  if (!built.endsWith(".js")) continue;
  const source = built.replace(/^\.\/dist\//, "../../../src/").replace(/\.js$/, ".ts");
  modules[subpath === "." ? "edgelimit" : `edgelimit/${subpath.slice(2)}`] = await import(source);
}

export const m = (entry: string): Record<string, Loose> => modules[entry] as Record<string, Loose>;

export const policy = definePolicy({ tiers: { anonymous: { global: 5 } } });
export const store = memoryStore();
export const limiter = m("edgelimit").createLimiter({ policy, store });
