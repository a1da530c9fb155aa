/**
 * The few Cloudflare runtime shapes this adapter touches, declared structurally so that the
 * package type-checks and tests in Node without @cloudflare/workers-types in scope. Each matches
 * the runtime's own interface (see @cloudflare/workers-types) for the members used here.
 */

/** The native `ratelimits` binding: counts the call and answers whether the key is within its limit. */
export interface RateLimitBinding {
  limit(options: { key: string; delta?: number }): Promise<{ success: boolean }>;
}

export interface DurableObjectIdLike {
  toString(): string;
}

export interface DurableObjectStubLike {
  fetch(input: string, init?: RequestInit): Promise<Response>;
}

export interface DurableObjectNamespaceLike {
  idFromName(name: string): DurableObjectIdLike;
  get(id: DurableObjectIdLike, options?: { locationHint?: string }): DurableObjectStubLike;
}

export interface DurableObjectStorageLike {
  get<T>(key: string): Promise<T | undefined>;
  list<T>(options?: { prefix?: string }): Promise<Map<string, T>>;
  put<T>(entries: Record<string, T>): Promise<void>;
  delete(keys: string[]): Promise<number>;
  deleteAll(): Promise<void>;
  getAlarm(): Promise<number | null>;
  setAlarm(scheduledTime: number): Promise<void>;
  deleteAlarm(): Promise<void>;
}

export interface DurableObjectStateLike {
  readonly storage: DurableObjectStorageLike;
  blockConcurrencyWhile<T>(callback: () => Promise<T>): Promise<T>;
}

/** A Worker's `env`: secrets and vars are strings, bindings are objects. */
export type WorkerEnv = Readonly<Record<string, unknown>>;

export interface ExecutionContextLike {
  waitUntil(promise: Promise<unknown>): void;
}
