/**
 * Overrides kept in this process (the memory store's `overrides()`): every limiter on one
 * memory store shares them, as they share its counters. Bounded: at most `max` overrides (the
 * expired ones are pruned before refusing) and `OVERRIDE_LOG_SIZE` changes in the log.
 */
import { EdgelimitError } from "../core/errors.js";
import {
  OVERRIDE_LOG_SIZE,
  type Override,
  type OverrideChange,
  type OverrideSource,
} from "../core/overrides.js";

export class MemoryOverrides implements OverrideSource {
  readonly name = "memory";
  readonly #held = new Map<string, Override>();
  readonly #log: OverrideChange[] = [];
  #version = 0;

  async version(): Promise<string> {
    return String(this.#version);
  }

  async list(): Promise<readonly Override[]> {
    return [...this.#held.values()];
  }

  async put(override: Override, now: number, max: number): Promise<void> {
    const field = fieldOf(override.subject, override.scope);
    if (!this.#held.has(field) && this.#held.size >= max) {
      for (const [key, held] of this.#held) {
        if (held.until !== undefined && held.until <= now) this.#held.delete(key);
      }
      if (this.#held.size >= max) throw full(max);
    }
    this.#held.set(field, override);
    this.#changed(setChange(override));
  }

  async delete(subject: string, scope: string, change: OverrideChange): Promise<boolean> {
    if (!this.#held.delete(fieldOf(subject, scope))) return false;
    this.#changed(change);
    return true;
  }

  async changes(count: number): Promise<readonly OverrideChange[]> {
    return count <= 0 ? [] : this.#log.slice(-count);
  }

  #changed(change: OverrideChange): void {
    this.#version++;
    this.#log.push(change);
    if (this.#log.length > OVERRIDE_LOG_SIZE)
      this.#log.splice(0, this.#log.length - OVERRIDE_LOG_SIZE);
  }
}

/** A store's `overrides()`: one `MemoryOverrides`, made when first asked for. */
export function heldOverrides(): () => MemoryOverrides {
  let held: MemoryOverrides | undefined;
  return () => {
    held ??= new MemoryOverrides();
    return held;
  };
}

/** The log's entry for setting `override` (the memory and Redis stores log the same). */
export function setChange(override: Override): OverrideChange {
  return {
    at: override.setAt,
    action: "set",
    subject: override.subject,
    scope: override.scope,
    override,
    ...(override.note === undefined ? {} : { note: override.note }),
  };
}

/** One override per subject and scope: a subject never holds a space, so this is unambiguous. */
export function fieldOf(subject: string, scope: string): string {
  return `${subject} ${scope}`;
}

export function full(max: number): EdgelimitError {
  return new EdgelimitError(
    "EL_OVERRIDE_FULL",
    `the store holds ${max} overrides already, none expired; remove some (edgelimit override list, remove) before setting more`,
  );
}
