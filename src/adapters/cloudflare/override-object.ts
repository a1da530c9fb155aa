/**
 * Operators' overrides kept in a Durable Object: the `EdgelimitCounter` class addressed by the
 * reserved name `{overrides}` (`idFromName(OVERRIDES_OBJECT)`), so a Worker needs no binding or
 * migration of its own for them. No counter can be that object: a counter key always holds a
 * `|` (core/keys.ts), and this name holds none.
 *
 * One object for every isolate of the Worker, in one place: each isolate reads it once per
 * `refreshMs` (one small call that returns the version, and the whole list only when the
 * caller's version is not the object's: override-source.ts), never on a request's path.
 *
 * Storage, under keys no counter uses (the `{overrides}/` prefix):
 * - `{overrides}/version`: `{ epoch, seq }`; `epoch` is random, drawn at the first change, so a
 *   version read before the object's storage was wiped is never taken for one read after it;
 * - `{overrides}/o/<subject> <scope>`: one override each (at most `MAX_OVERRIDES`);
 * - `{overrides}/log/<slot>`: the change log, a ring of `OVERRIDE_LOG_SIZE` entries, slot
 *   `seq` mod that size, as the DynamoDB store keeps it: no value grows.
 *
 * The object holds the overrides in memory too (read from storage at its first call), so a
 * version read touches no storage. Changes are applied in memory first and written after, and
 * the runtime's output gate holds the answer until the write is durable, as for counters.
 */
import {
  MAX_OVERRIDES,
  OVERRIDE_LOG_SIZE,
  type Override,
  type OverrideChange,
} from "../../core/overrides.js";
import { fieldOf, full, setChange } from "../../stores/memory-overrides.js";
import type { DurableObjectStorageLike } from "./bindings.js";

/** The name the overrides object is addressed by (`idFromName`). */
export const OVERRIDES_OBJECT = "{overrides}";
/** The paths of the overrides object; the counter object answers the rest. */
export const OVERRIDES_PATH = "/overrides/";

/** `POST /overrides/read`: the version, and the overrides when `known` is not it. */
export interface OverridesRead {
  readonly version: string;
  readonly overrides?: readonly Override[];
}

const PREFIX = "{overrides}/";
const VERSION_KEY = `${PREFIX}version`;
const OVERRIDE_PREFIX = `${PREFIX}o/`;
const LOG_PREFIX = `${PREFIX}log/`;
/** Keys one storage call may take (the runtime's bound for `put` and `delete`). */
const KEYS_PER_CALL = 128;

interface StoredVersion {
  readonly epoch: string;
  readonly seq: number;
}

interface LoggedChange {
  readonly seq: number;
  readonly change: OverrideChange;
}

/** Whether a storage key is one of the overrides' (the counter object loads none of them). */
export function isOverridesKey(key: string): boolean {
  return key.startsWith(PREFIX);
}

export class OverrideLedger {
  readonly #storage: DurableObjectStorageLike;
  #loaded: Promise<void> | undefined;
  readonly #held = new Map<string, Override>();
  #version: StoredVersion = { epoch: "0", seq: 0 };

  constructor(storage: DurableObjectStorageLike) {
    this.#storage = storage;
  }

  /** Answers one call of override-source.ts; a 409 carries `EL_OVERRIDE_FULL`. */
  async handle(request: Request, path: string): Promise<Response> {
    if (request.method !== "POST") return new Response("not found", { status: 404 });
    let body: Record<string, unknown>;
    try {
      body = objectOf(await request.json());
    } catch (error) {
      return new Response(error instanceof Error ? error.message : "bad request", { status: 400 });
    }
    await this.#load();
    switch (path) {
      case "read": {
        const version = this.#versionText();
        const read: OverridesRead =
          body.known === version ? { version } : { version, overrides: [...this.#held.values()] };
        return Response.json(read);
      }
      case "put": {
        const override = body.override as Override;
        if (typeof override?.subject !== "string" || typeof override.scope !== "string") {
          return new Response("expected { override, now, max }", { status: 400 });
        }
        const max = Math.min(Number(body.max) || MAX_OVERRIDES, MAX_OVERRIDES);
        const refused = await this.#put(override, Number(body.now), max);
        if (refused !== undefined) return Response.json(refused, { status: 409 });
        return new Response(null, { status: 204 });
      }
      case "delete": {
        const change = body.change as OverrideChange | undefined;
        const removed = await this.#delete(String(body.subject), String(body.scope), change);
        return Response.json({ removed });
      }
      case "changes":
        return Response.json({ changes: await this.#changes(Number(body.count)) });
      default:
        return new Response("not found", { status: 404 });
    }
  }

  #load(): Promise<void> {
    this.#loaded ??= (async () => {
      const stored = await this.#storage.list<Override>({ prefix: OVERRIDE_PREFIX });
      for (const override of stored.values()) {
        this.#held.set(fieldOf(override.subject, override.scope), override);
      }
      this.#version = (await this.#storage.get<StoredVersion>(VERSION_KEY)) ?? this.#version;
    })().catch((error: unknown) => {
      this.#loaded = undefined; // the next call reads again
      throw error;
    });
    return this.#loaded;
  }

  #versionText(): string {
    return `${this.#version.epoch}.${this.#version.seq}`;
  }

  async #put(
    override: Override,
    now: number,
    max: number,
  ): Promise<{ code: string; message: string } | undefined> {
    const field = fieldOf(override.subject, override.scope);
    const pruned: string[] = [];
    if (!this.#held.has(field) && this.#held.size >= max) {
      for (const [key, held] of this.#held) {
        if (held.until !== undefined && held.until <= now) pruned.push(key);
      }
      if (this.#held.size - pruned.length >= max) {
        const error = full(max);
        return { code: error.code, message: error.message };
      }
      for (const key of pruned) this.#held.delete(key);
    }
    this.#held.set(field, override);
    await this.#write({ [OVERRIDE_PREFIX + field]: override }, pruned, setChange(override));
    return undefined;
  }

  async #delete(
    subject: string,
    scope: string,
    change: OverrideChange | undefined,
  ): Promise<boolean> {
    const field = fieldOf(subject, scope);
    if (!this.#held.delete(field)) return false;
    const logged = change ?? { at: Date.now(), action: "remove" as const, subject, scope };
    await this.#write({}, [field], logged);
    return true;
  }

  /** One change: its overrides, the version and the log slot, in one storage call. */
  async #write(
    entries: Record<string, unknown>,
    removed: readonly string[],
    change: OverrideChange,
  ): Promise<void> {
    const seq = this.#version.seq + 1;
    const epoch = this.#version.seq === 0 ? crypto.randomUUID() : this.#version.epoch;
    this.#version = { epoch, seq };
    const logged: LoggedChange = { seq, change };
    const writes: Promise<unknown>[] = [
      this.#storage.put({
        ...entries,
        [VERSION_KEY]: this.#version,
        [LOG_PREFIX + String(seq % OVERRIDE_LOG_SIZE).padStart(4, "0")]: logged,
      }),
    ];
    const keys = removed.map((field) => OVERRIDE_PREFIX + field);
    for (let at = 0; at < keys.length; at += KEYS_PER_CALL) {
      writes.push(this.#storage.delete(keys.slice(at, at + KEYS_PER_CALL)));
    }
    await Promise.all(writes);
  }

  async #changes(count: number): Promise<OverrideChange[]> {
    if (!(count > 0)) return [];
    const ring = await this.#storage.list<LoggedChange>({ prefix: LOG_PREFIX });
    return [...ring.values()]
      .sort((a, b) => a.seq - b.seq)
      .slice(-Math.min(count, OVERRIDE_LOG_SIZE))
      .map((logged) => logged.change);
  }
}

function objectOf(input: unknown): Record<string, unknown> {
  if (input === null || typeof input !== "object" || Array.isArray(input)) {
    throw new TypeError("expected a JSON object");
  }
  return input as Record<string, unknown>;
}
