import { GenerationalCache } from "../core/generational-cache.js";
import { ipv4Key, parseIp } from "../core/ip.js";

/** Texts remembered per cache generation: a log's working set of IPv6 clients. */
const ADDRESSES_PER_GENERATION = 8_192;

/**
 * Whether a log's client address is one the limiter can count. One it cannot (`999.1.2.3`, a
 * host name) would be counted as `ip:unknown`, with every other such line; replay calls the
 * line malformed instead. The same parser as the engine's (core/ip.ts), so the two never
 * disagree; dotted quads are checked without a lookup, other texts remembered.
 */
export class AddressCheck {
  readonly #known = new GenerationalCache<boolean>(ADDRESSES_PER_GENERATION);

  valid(text: string): boolean {
    if (ipv4Key(text) !== undefined) return true;
    const known = this.#known.get(text);
    if (known !== undefined) return known;
    const valid = parseIp(text) !== undefined;
    this.#known.set(text, valid);
    return valid;
  }
}
