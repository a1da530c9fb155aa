import { GenerationalCache } from "./generational-cache.js";
import { type Address, CidrSet, ipSubject, ipv4Key, parseIp } from "./ip.js";
import { subjectKey } from "./keys.js";
import type { IpIdentity } from "./model.js";
import { readHeader } from "./request-headers.js";
import type { RequestDescription } from "./types.js";

export interface ClientAddress {
  /** The address the client is counted as, undefined when nothing valid was found. */
  readonly address: Address | undefined;
  /** The counted subject: the address, or its IPv6 prefix. "unknown" without an address. */
  readonly subject: string;
  /** The subject as a key part: `ip:203.0.113.7` (see keys.ts). */
  readonly subjectKey: string;
  /** Whether the socket peer is one of the trusted proxies. */
  readonly peerTrusted: boolean;
}

/** What one address text resolves to; cached, since the same clients come back. */
interface ParsedAddress {
  readonly address: Address | undefined;
  readonly subject: string;
  readonly subjectKey: string;
  readonly trusted: boolean;
}

/**
 * Addresses per cache generation (at most twice this many held, dotted quads and other texts
 * each): a working set of this size is answered from the young generation alone, with one
 * lookup.
 */
const CACHED_ADDRESSES_PER_GENERATION = 16_384;
const UNPARSED: ParsedAddress = {
  address: undefined,
  subject: "unknown",
  subjectKey: subjectKey("ip", "unknown"),
  trusted: false,
};

/**
 * Finds the client's address using only what is trustworthy: the socket peer, a header that
 * the platform sets, or `X-Forwarded-For` read right to left while each hop is a trusted proxy.
 * A client that writes `X-Forwarded-For` itself only adds entries to the left of the address
 * our proxy appended, so they are never reached.
 */
export class IpResolver {
  readonly #config: IpIdentity;
  readonly #trusted: CidrSet;
  readonly #cache = new GenerationalCache<ParsedAddress>(CACHED_ADDRESSES_PER_GENERATION);
  /** Dotted quads by their number (see `ipv4Key`): the usual client text, found without a string. */
  readonly #quads = new GenerationalCache<ParsedAddress, number>(CACHED_ADDRESSES_PER_GENERATION);
  #lastPeerText: string | undefined;
  #lastPeer: ParsedAddress = UNPARSED;

  constructor(config: IpIdentity) {
    this.#config = config;
    this.#trusted = new CidrSet(config.trustedProxies);
  }

  resolve(request: RequestDescription): ClientAddress {
    const peer = this.#parsePeer(request.ip);
    let client = peer;
    const { source } = this.#config;
    if (source === "header" && this.#config.header !== undefined) {
      const fromHeader = this.#parse(
        readHeader(request.headers, this.#config.header, request.lowerCaseHeaders),
      );
      if (fromHeader.address !== undefined) client = fromHeader;
    } else if (source === "x-forwarded-for" && peer.trusted) {
      client = this.#walkForwardedFor(
        readHeader(request.headers, "x-forwarded-for", request.lowerCaseHeaders),
        peer,
      );
    }
    return {
      address: client.address,
      subject: client.subject,
      subjectKey: client.subjectKey,
      peerTrusted: peer.trusted,
    };
  }

  isTrusted(address: Address | undefined): boolean {
    return this.#trusted.has(address);
  }

  #walkForwardedFor(header: string | undefined, peer: ParsedAddress): ParsedAddress {
    if (header === undefined || header === "") return peer;
    let client = peer;
    // Right to left without splitting: a single hop is looked up as the header string itself.
    let end = header.length;
    for (;;) {
      const comma = end === 0 ? -1 : header.lastIndexOf(",", end - 1);
      const hop = this.#parse(header.slice(comma + 1, end).trim());
      // A malformed entry was written by an untrusted party: stop at the last hop we trust.
      if (hop.address === undefined) return client;
      client = hop;
      if (!hop.trusted || comma === -1) return hop;
      end = comma;
    }
  }

  /**
   * The socket peer: behind a proxy it is the same few addresses on every request, so the last
   * one is remembered apart, which spares a lookup in the address cache.
   */
  #parsePeer(text: string | undefined): ParsedAddress {
    const last = this.#lastPeerText;
    if (text !== undefined && text === last) return this.#lastPeer;
    const parsed = this.#parse(text);
    this.#lastPeerText = text;
    this.#lastPeer = parsed;
    return parsed;
  }

  /** Parses an address text once; later requests from the same client reuse the result. */
  #parse(text: string | undefined): ParsedAddress {
    if (text === undefined) return UNPARSED;
    // A dotted quad is looked up by its number: no key string to hash or compare (see
    // `ipv4Key` for where that was measured).
    const quad = ipv4Key(text);
    const cache: GenerationalCache<ParsedAddress, string | number> =
      quad === undefined ? this.#cache : this.#quads;
    const key = quad ?? text;
    const cached = cache.get(key);
    if (cached !== undefined) return cached;
    const address = parseIp(text);
    const subject = address === undefined ? "unknown" : ipSubject(address, this.#config.ipv6Prefix);
    const parsed: ParsedAddress = {
      address,
      subject,
      subjectKey: subjectKey("ip", subject),
      trusted: this.#trusted.has(address),
    };
    cache.set(key, parsed);
    return parsed;
  }
}
