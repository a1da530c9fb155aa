import type { Address } from "../../core/ip.js";
import type { ResolvedPolicy } from "../../core/model.js";
import type { AddressList } from "../../limiter.js";
import { createLists, type Lists } from "../../lists/index.js";

/**
 * The policy's refreshing lists for a function that cannot wait at cold start: the first
 * request is answered with the static lists while the sources load, and each list then
 * reloads in the background when a lookup finds it older than its refresh interval (a frozen
 * Lambda has no timers to rely on). Failed loads keep the last good list.
 */
export function edgeLists(policy: ResolvedPolicy): { allow: AddressList[]; deny: AddressList[] } {
  let loaded: Lists | undefined;
  createLists(policy, { mode: "on-access", waitForFirstLoad: false }).then(
    (lists) => {
      loaded = lists;
    },
    (error: unknown) =>
      console.error(
        JSON.stringify({ msg: "edgelimit lists failed to start", error: String(error) }),
      ),
  );
  const anyOf = (pick: (lists: Lists) => readonly AddressList[]): AddressList => ({
    has(address: Address | undefined) {
      if (loaded === undefined) return false;
      for (const list of pick(loaded)) if (list.has(address)) return true;
      return false;
    },
  });
  return { allow: [anyOf((lists) => lists.allow)], deny: [anyOf((lists) => lists.deny)] };
}
