/**
 * Part 3 of bench/rls.bench.ts: Redis server time (`INFO commandstats`, usec) of every command
 * the service sent for some decisions, against the reference's pattern for the same decisions
 * sent by the bench: one INCRBY and one EXPIRE per descriptor, pipelined, as
 * envoyproxy/ratelimit sends them.
 */
import type { Redis } from "ioredis";
import { clientAddress, PATH } from "./rls-calls.js";

export interface CommandTime {
  readonly calls: number;
  readonly usec: number;
}

export async function commandTimes(redis: Redis): Promise<Map<string, CommandTime>> {
  const text = await redis.info("commandstats");
  const times = new Map<string, CommandTime>();
  for (const match of text.matchAll(/cmdstat_(\w+):calls=(\d+),usec=(\d+)/g)) {
    times.set(match[1] as string, { calls: Number(match[2]), usec: Number(match[3]) });
  }
  return times;
}

/** envoyproxy/ratelimit's pattern: INCRBY and EXPIRE per descriptor, one pipeline per decision. */
export async function referencePattern(
  redis: Redis,
  decisions: number,
  inFlight: number,
): Promise<void> {
  const window = Math.floor(Date.now() / 60_000) * 60;
  let next = 0;
  const worker = async () => {
    while (next < decisions) {
      const address = clientAddress(next++);
      const keys = [
        `edge_remote_address_${address}_${window}`,
        `edge_remote_address_${address}_path_${PATH}_${window}`,
      ];
      const pipeline = redis.pipeline();
      for (const key of keys) pipeline.incrby(key, 1).expire(key, 60);
      await pipeline.exec();
    }
  };
  await Promise.all(Array.from({ length: inFlight }, worker));
}

/** The usec of `names` in all, and each one's count and µs per call, as text. */
export function usecOf(times: Map<string, CommandTime>, names: readonly string[]): number {
  return names.reduce((sum, name) => sum + (times.get(name)?.usec ?? 0), 0);
}

export function callsOf(times: Map<string, CommandTime>, names: readonly string[]): string {
  return names
    .map((name) => {
      const { calls = 0, usec: spent = 0 } = times.get(name) ?? {};
      return `${name} ${calls}${calls > 0 ? ` at ${(spent / calls).toFixed(2)} µs` : ""}`;
    })
    .join(", ");
}
