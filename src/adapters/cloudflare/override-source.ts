/**
 * The Worker's side of the overrides object (override-object.ts): the `OverrideSource` a
 * `CloudflareStore` gives its limiter. Each call is one request to the object `{overrides}`.
 *
 * `version` asks for the version and, in the same round trip, for the overrides when the version
 * is not the one this source last saw; `list` then answers from that reply without a second
 * call. So a refresh that finds nothing new is one small call, and one that finds a change (or an
 * isolate's first read) is one call too, which is what a far isolate waits for at its start.
 */
import { EdgelimitError, type ErrorCode } from "../../core/errors.js";
import type { Override, OverrideChange, OverrideSource } from "../../core/overrides.js";
import type { DurableObjectNamespaceLike } from "./bindings.js";
import { OVERRIDES_OBJECT, OVERRIDES_PATH, type OverridesRead } from "./override-object.js";

const OBJECT_ORIGIN = "https://edgelimit-overrides";
/**
 * A call still unanswered after this long has failed: a refresh then settles (the watch keeps
 * its copy and a later request tries again), so no refresh waits on a stuck object for ever and
 * the refreshes an isolate holds in flight stay a few.
 */
const CALL_TIMEOUT_MS = 3_000;

export class DurableObjectOverrides implements OverrideSource {
  readonly name = "durable-object";
  readonly #objects: DurableObjectNamespaceLike;
  /** The version last read, and the overrides read with it until `list` takes them. */
  #seen: string | undefined;
  #read: readonly Override[] | undefined;

  constructor(objects: DurableObjectNamespaceLike) {
    this.#objects = objects;
  }

  async version(): Promise<string> {
    const read = (await this.#call("read", { known: this.#seen })) as OverridesRead;
    if (read.overrides !== undefined) this.#read = read.overrides;
    this.#seen = read.version;
    return read.version;
  }

  async list(): Promise<readonly Override[]> {
    const held = this.#read;
    if (held !== undefined) {
      this.#read = undefined;
      return held;
    }
    const read = (await this.#call("read", {})) as OverridesRead;
    this.#seen = read.version;
    return read.overrides ?? [];
  }

  async put(override: Override, now: number, max: number): Promise<void> {
    await this.#call("put", { override, now, max });
  }

  async delete(subject: string, scope: string, change: OverrideChange): Promise<boolean> {
    const answer = (await this.#call("delete", { subject, scope, change })) as { removed: boolean };
    return answer.removed;
  }

  async changes(count: number): Promise<readonly OverrideChange[]> {
    const answer = (await this.#call("changes", { count })) as { changes: OverrideChange[] };
    return answer.changes;
  }

  async #call(path: string, body: unknown): Promise<unknown> {
    let timer: ReturnType<typeof setTimeout> | undefined;
    const late = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () =>
          reject(
            new EdgelimitError(
              "EL_STORE_TIMEOUT",
              `cloudflare: the overrides object did not answer within ${CALL_TIMEOUT_MS} ms`,
            ),
          ),
        CALL_TIMEOUT_MS,
      );
    });
    try {
      return await Promise.race([this.#answer(path, body), late]);
    } finally {
      clearTimeout(timer);
    }
  }

  async #answer(path: string, body: unknown): Promise<unknown> {
    const stub = this.#objects.get(this.#objects.idFromName(OVERRIDES_OBJECT));
    const response = await stub.fetch(OBJECT_ORIGIN + OVERRIDES_PATH + path, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(body),
    });
    if (response.status === 204) return undefined;
    if (response.status === 409) {
      const refused = (await response.json()) as { code: ErrorCode; message: string };
      throw new EdgelimitError(refused.code, refused.message);
    }
    if (!response.ok) {
      throw new EdgelimitError(
        "EL_STORE_FAILED",
        `cloudflare: the overrides object answered ${response.status}: ${await response.text()}`,
      );
    }
    return response.json();
  }
}
