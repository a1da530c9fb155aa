/**
 * What the long-running commands (`serve`, `rls`) share: watching the files they reload, and
 * running until SIGTERM or SIGINT.
 */
import { type FSWatcher, statSync, watch } from "node:fs";
import { basename, dirname, resolve } from "node:path";
import type { Logger } from "pino";

/** Changes to a watched file or directory within this long are one reload. */
const RELOAD_DEBOUNCE_MS = 200;

/**
 * Calls `onChange` after `path` changes: a file is watched through its directory (editors
 * replace files, which drops a watch on the file itself), a directory with what is below it; in
 * a Kubernetes ConfigMap volume, either sees the kubelet swap its `..data` link. Undefined when it cannot be watched,
 * which is logged: SIGHUP still reloads.
 */
export function watchPath(
  path: string,
  onChange: () => void,
  logger: Logger,
): FSWatcher | undefined {
  let timer: NodeJS.Timeout | undefined;
  const changed = (): void => {
    clearTimeout(timer);
    timer = setTimeout(onChange, RELOAD_DEBOUNCE_MS);
  };
  try {
    const name = basename(path);
    const watcher = statSync(path).isDirectory()
      ? watch(path, { recursive: true }, changed)
      : watch(dirname(resolve(path)), (_event, file) => {
          // A file in a ConfigMap volume is a link through `..data`, which the kubelet swaps.
          if (file === null || file === name || file.startsWith("..")) changed();
        });
    watcher.on("error", (error) =>
      logger.warn({ msg: `watching ${path} stopped; SIGHUP still reloads`, err: error }),
    );
    watcher.unref();
    return watcher;
  } catch (error) {
    logger.warn({ msg: `cannot watch ${path}; SIGHUP still reloads`, err: error });
    return undefined;
  }
}

/**
 * Resolves to the exit code (0) once SIGTERM or SIGINT has arrived and `stop` has finished
 * draining; a second signal while it drains changes nothing.
 */
export function untilStopped(
  logger: Logger,
  stop: (signal: string) => Promise<void>,
  draining: () => Record<string, unknown> = () => ({}),
): Promise<number> {
  return new Promise<number>((resolveExit) => {
    let stopping = false;
    const onSignal = (signal: string) => {
      if (stopping) return;
      stopping = true;
      logger.info({ msg: "draining", signal, ...draining() });
      void stop(signal).then(() => {
        logger.info({ msg: "stopped" });
        resolveExit(0);
      });
    };
    process.once("SIGTERM", () => onSignal("SIGTERM"));
    process.once("SIGINT", () => onSignal("SIGINT"));
  });
}
