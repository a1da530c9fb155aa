import { watch as watchDirectory } from "node:fs";
import { readFile } from "node:fs/promises";
import { basename, dirname, resolve } from "node:path";
import { parseListBody } from "./parse.js";
import type { ListSource } from "./refreshing.js";

/** Editors and deploy tools write a temporary file and rename it; coalesce the burst of events. */
const DEBOUNCE_MS = 50;

/**
 * A list file (JSON or one address per line), reloaded when it changes. The directory is
 * watched rather than the file, because replacing a file by rename ends a watch on the old one.
 */
export function fileListSource(path: string): ListSource {
  const absolute = resolve(path);
  const name = basename(absolute);
  const description = `file ${path}`;
  return {
    description,
    async load() {
      return parseListBody(await readFile(absolute, "utf8"), description);
    },
    watch(onChange) {
      let pending: ReturnType<typeof setTimeout> | undefined;
      let watcher: ReturnType<typeof watchDirectory>;
      try {
        watcher = watchDirectory(dirname(absolute), { persistent: false }, (_event, changed) => {
          if (changed !== null && changed.toString() !== name) return;
          if (pending !== undefined) clearTimeout(pending);
          pending = setTimeout(onChange, DEBOUNCE_MS);
        });
      } catch {
        // No watcher (missing directory, no inotify): the interval refresh still runs.
        return () => undefined;
      }
      watcher.on("error", () => undefined);
      return () => {
        if (pending !== undefined) clearTimeout(pending);
        watcher.close();
      };
    },
  };
}
