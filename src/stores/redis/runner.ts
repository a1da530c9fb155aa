import { Cluster } from "ioredis";
import type { RedisClient } from "./client.js";
import { lostScript } from "./refusal.js";
import {
  APPLY_COUNTERS_FUNCTION,
  APPLY_COUNTERS_LIBRARY,
  APPLY_COUNTERS_LUA,
  APPLY_COUNTERS_SHA,
} from "./script.js";

/**
 * How the store runs its Lua: as a Redis 7 function (`FCALL`), whose helpers Redis creates once
 * per `FUNCTION LOAD` instead of once per call, or as a script (`EVALSHA`) where functions are
 * unavailable (Redis before 7, a proxy or an ACL that refuses `FUNCTION`). Both forms are the
 * same code with the same arguments and reply (script.ts).
 *
 * The server can lose either (`FUNCTION FLUSH`, `SCRIPT FLUSH`, a restart without persistence,
 * a failover to a replica that never had the script: functions are replicated, scripts are
 * not). A call that finds its code gone is decided at once by `EVAL` with the source, which
 * caches the script, while the library is loaded again in the background: no decision is lost,
 * and it costs one extra round trip.
 */
export class ScriptRunner {
  readonly #client: RedisClient;
  /** Counts each call sent (the fallbacks too), for `RedisStore.roundTrips`. */
  readonly #sent: () => void;
  /** False once a server has refused functions: scripts from then on. */
  #functions = true;
  /** The library load in flight, shared by every call that found it missing. */
  #reloading: Promise<void> | undefined;

  constructor(client: RedisClient, sent: () => void) {
    this.#client = client;
    this.#sent = sent;
  }

  /**
   * Whether the server runs functions (Redis 7), as far as this runner knows: the blind
   * fixed-window path needs Redis 7 too (`PEXPIRE … NX`); the script counts the same keys.
   */
  get functions(): boolean {
    return this.#functions;
  }

  /**
   * Loads the library on every master (and the script, where functions are refused), so that
   * the first calls after a (re)connection find it.
   */
  async load(): Promise<void> {
    const masters = this.#client instanceof Cluster ? this.#client.nodes("master") : [this.#client];
    await Promise.all(
      masters.map(async (node) => {
        if (this.#functions) {
          try {
            await node.function("LOAD", APPLY_COUNTERS_LIBRARY);
            return;
          } catch (error) {
            // Another process of this version loaded it first.
            if (message(error).includes("already exists")) return;
            if (!refusesFunctions(error)) throw error;
            this.#functions = false;
          }
        }
        await node.script("LOAD", APPLY_COUNTERS_LUA);
      }),
    );
  }

  /** One call of the Lua with these keys and arguments; its reply. */
  run(keys: string[], args: string[]): Promise<unknown> {
    this.#sent();
    const client = this.#client;
    const call = this.#functions
      ? client.fcall(APPLY_COUNTERS_FUNCTION, keys.length, ...keys, ...args)
      : client.evalsha(APPLY_COUNTERS_SHA, keys.length, ...keys, ...args);
    return call.catch((error: unknown) => this.#recover(error, keys, args));
  }

  /** After a failed call: EVAL when the server lost (or never had) the code, else the error. */
  #recover(error: unknown, keys: string[], args: string[]): Promise<unknown> {
    const text = message(error);
    if (this.#functions && refusesFunctions(error)) {
      this.#functions = false;
    } else if (this.#functions && text.includes("Function not found")) {
      this.#reloadInBackground();
    } else if (!lostScript(error)) {
      return Promise.reject(error);
    }
    // EVAL runs the code and caches the script.
    this.#sent();
    return this.#client.eval(APPLY_COUNTERS_LUA, keys.length, ...keys, ...args);
  }

  #reloadInBackground(): void {
    if (this.#reloading !== undefined) return;
    const done = (): void => {
      this.#reloading = undefined;
    };
    this.#reloading = this.load().then(done, done);
  }
}

function message(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** An answer that says this server (or proxy, or ACL user) does not run functions. */
function refusesFunctions(error: unknown): boolean {
  const text = message(error);
  return /unknown command|unknown subcommand|NOPERM/i.test(text);
}
