/**
 * A memory store whose overrides count their version reads and can be held back (`hold`), for
 * the tests of how overrides are refreshed (test/core/overrides-*.test.ts). `traits` stand in for
 * a store of another runtime (`requestScopedIo`: workerd).
 */
import type { OverrideSource } from "../../src/core/overrides.js";
import type { StoreTraits } from "../../src/core/types.js";
import { MemoryStore } from "../../src/stores/memory.js";

export class WatchedStore extends MemoryStore {
  versionReads = 0;
  hold: Promise<void> | undefined;

  constructor(traits: Partial<StoreTraits> = {}) {
    super();
    if (Object.keys(traits).length > 0) {
      (this as { traits: StoreTraits }).traits = { ...this.traits, ...traits };
    }
    const source = this.overrides();
    const watched: OverrideSource = {
      name: source.name,
      version: async () => {
        this.versionReads++;
        if (this.hold !== undefined) await this.hold;
        return source.version();
      },
      list: () => source.list(),
      put: (override, now, max) => source.put(override, now, max),
      delete: (subject, scope, change) => source.delete(subject, scope, change),
      changes: (count) => source.changes(count),
    };
    (this as { overrides: () => OverrideSource }).overrides = () => watched;
  }
}
