import type { CounterSpec, CounterState } from "../../core/types.js";

/**
 * A Cluster cannot run one script over keys in different slots. Every counter of one subject
 * shares a slot (its hash tag), so a request's counters are grouped by subject and each group
 * is applied by `applyGroup` in parallel: one round trip of latency, atomic per subject (see
 * docs/redis.md for what that means for admission across subjects).
 */
export async function applyBySubject(
  counters: readonly CounterSpec[],
  applyGroup: (group: readonly CounterSpec[]) => Promise<CounterState[]>,
): Promise<CounterState[]> {
  const first = counters[0] as CounterSpec;
  if (counters.every((counter) => counter.subject === first.subject)) return applyGroup(counters);
  const groups = new Map<string, number[]>();
  counters.forEach((counter, index) => {
    const members = groups.get(counter.subject);
    if (members === undefined) groups.set(counter.subject, [index]);
    else members.push(index);
  });
  const results: CounterState[] = new Array(counters.length);
  await Promise.all(
    [...groups.values()].map(async (indexes) => {
      const states = await applyGroup(indexes.map((index) => counters[index] as CounterSpec));
      indexes.forEach((index, position) => {
        results[index] = states[position] as CounterState;
      });
    }),
  );
  return results;
}
