import { EdgelimitError } from "./errors.js";

const HEX_GROUP = /^[0-9a-fA-F]{1,4}$/;

/**
 * An IPv4 (4 bytes) or IPv6 (16 bytes) address. Strict on purpose: only dotted quads for IPv4
 * (no "127.1", no octal or hex parts), so that one client cannot write its address several
 * ways and be counted as several clients.
 */
class Address {
  readonly #bytes: Uint8Array;
  #text: string | undefined;

  constructor(bytes: Uint8Array) {
    this.#bytes = bytes;
  }

  kind(): "ipv4" | "ipv6" {
    return this.#bytes.length === 4 ? "ipv4" : "ipv6";
  }

  /** Dotted quad, or RFC 5952 for IPv6 (lower case, longest run of zero groups as `::`). */
  toString(): string {
    this.#text ??= this.#bytes.length === 4 ? this.#bytes.join(".") : formatIpv6(this.#bytes);
    return this.#text;
  }

  /** A copy of the bytes, network order. */
  toByteArray(): number[] {
    return [...this.#bytes];
  }

  /** True when the first `bits` bits equal the range's (both of the same kind). */
  match(range: Address, bits: number): boolean {
    const mine = this.#bytes;
    const theirs = range.#bytes;
    if (mine.length !== theirs.length) return false;
    const whole = bits >> 3;
    for (let i = 0; i < whole; i++) if (mine[i] !== theirs[i]) return false;
    const rest = bits & 7;
    if (rest === 0) return true;
    const mask = (0xff << (8 - rest)) & 0xff;
    return ((mine[whole] as number) & mask) === ((theirs[whole] as number) & mask);
  }
}

function formatIpv6(bytes: Uint8Array): string {
  const groups: number[] = [];
  for (let i = 0; i < 16; i += 2)
    groups.push(((bytes[i] as number) << 8) | (bytes[i + 1] as number));
  let bestStart = -1;
  let bestLength = 1;
  for (let i = 0; i < 8; ) {
    if (groups[i] !== 0) {
      i++;
      continue;
    }
    let end = i;
    while (end < 8 && groups[end] === 0) end++;
    if (end - i > bestLength) {
      bestStart = i;
      bestLength = end - i;
    }
    i = end;
  }
  const hex = (from: number, to: number) =>
    groups
      .slice(from, to)
      .map((group) => group.toString(16))
      .join(":");
  if (bestStart < 0) return hex(0, 8);
  return `${hex(0, bestStart)}::${hex(bestStart + bestLength, 8)}`;
}

function parseIpv4(text: string): Address | undefined {
  const key = ipv4Key(text);
  if (key === undefined) return undefined;
  return new Address(Uint8Array.of(key >>> 24, (key >>> 16) & 255, (key >>> 8) & 255, key & 255));
}

const DOT = 46;
const ZERO = 48;
const NINE = 57;

/**
 * A dotted quad spelled as `parseIp` accepts it without trimming (four decimal parts, no
 * leading zeros, none above 255) as one 32-bit integer, or undefined for any other text. Two
 * texts give the same number only if they are the same text, so the number can stand for the
 * text as a map key (the address cache looks dotted quads up by it, with no string to hash;
 * tools/profiling/gateway-instructions.sh measured the difference).
 */
export function ipv4Key(text: string): number | undefined {
  // A loop, not a regular expression: a cold start pays about 0.5 ms to compile the first one.
  let key = 0;
  let parts = 0;
  let value = 0;
  let digits = 0;
  const length = text.length;
  for (let i = 0; i <= length; i++) {
    const code = i < length ? text.charCodeAt(i) : DOT;
    if (code === DOT) {
      if (digits === 0 || parts === 4) return undefined;
      key = (key << 8) | value;
      parts++;
      value = 0;
      digits = 0;
      continue;
    }
    if (code < ZERO || code > NINE) return undefined;
    // "010" would be octal to some parsers: one spelling per address.
    if (digits > 0 && value === 0) return undefined;
    value = value * 10 + (code - ZERO);
    digits++;
    if (value > 255) return undefined;
  }
  return parts === 4 ? key : undefined;
}

/** Groups of 1-4 hex digits, one `::` at most, optionally ending in a dotted quad. */
function parseIpv6(text: string): Address | undefined {
  const words: number[] = [];
  let groups = text;
  const lastColon = text.lastIndexOf(":");
  let tailIpv4: Address | undefined;
  if (lastColon !== -1 && text.indexOf(".", lastColon) !== -1) {
    tailIpv4 = parseIpv4(text.slice(lastColon + 1));
    if (tailIpv4 === undefined) return undefined;
    // Keep the colon: "::1.2.3.4" leaves "::", "1:2:3:4:5:6:1.2.3.4" leaves "1:...:6:".
    groups = text.slice(0, lastColon + 1);
    if (groups.endsWith(":") && !groups.endsWith("::")) groups = groups.slice(0, -1);
  }
  // The deprecated IPv4-compatible form "::1.2.3.4" is read as IPv4-mapped, as ipaddr.js did.
  if (tailIpv4 !== undefined && groups === "::") groups = "::ffff";
  const capacity = tailIpv4 === undefined ? 8 : 6;
  const gap = groups.indexOf("::");
  const readGroups = (part: string): number[] | undefined => {
    if (part === "") return [];
    const parsed: number[] = [];
    for (const group of part.split(":")) {
      if (!HEX_GROUP.test(group)) return undefined;
      parsed.push(Number.parseInt(group, 16));
    }
    return parsed;
  };
  if (gap === -1) {
    const all = readGroups(groups);
    if (all === undefined || all.length !== capacity) return undefined;
    words.push(...all);
  } else {
    if (groups.indexOf("::", gap + 1) !== -1) return undefined;
    const head = readGroups(groups.slice(0, gap));
    const tail = readGroups(groups.slice(gap + 2));
    if (head === undefined || tail === undefined) return undefined;
    const missing = capacity - head.length - tail.length;
    if (missing < 1) return undefined;
    words.push(...head, ...new Array<number>(missing).fill(0), ...tail);
  }
  const bytes = new Uint8Array(16);
  for (let i = 0; i < words.length; i++) {
    bytes[2 * i] = (words[i] as number) >> 8;
    bytes[2 * i + 1] = (words[i] as number) & 0xff;
  }
  if (tailIpv4 !== undefined) bytes.set(tailIpv4.toByteArray(), 12);
  return new Address(bytes);
}

function isIpv4Mapped(bytes: readonly number[]): boolean {
  for (let i = 0; i < 10; i++) if (bytes[i] !== 0) return false;
  return bytes[10] === 0xff && bytes[11] === 0xff;
}

/** An address without brackets, port or zone; IPv4-mapped IPv6 left as IPv6. */
function parseBare(text: string): Address | undefined {
  return text.includes(":") ? parseIpv6(text) : parseIpv4(text);
}

/**
 * Parses an address as it appears in a socket, a header or `X-Forwarded-For`: bare, bracketed,
 * with a port (`1.2.3.4:5678`, `[::1]:80`) or a zone (`fe80::1%eth0`, dropped). IPv4-mapped
 * IPv6 (`::ffff:1.2.3.4`) becomes IPv4, so one client has one identity. Undefined when invalid.
 */
export function parseIp(raw: string | undefined): Address | undefined {
  if (raw === undefined) return undefined;
  let text = raw.trim();
  const quad = parseIpv4(text);
  if (quad !== undefined) return quad;
  if (text.startsWith("[")) {
    const close = text.indexOf("]");
    if (close < 0) return undefined;
    text = text.slice(1, close);
  } else if (text.indexOf(":") !== -1 && text.indexOf(":") === text.lastIndexOf(":")) {
    // One colon: IPv4 with a port.
    text = text.slice(0, text.indexOf(":"));
  }
  const zone = text.indexOf("%");
  if (zone !== -1) text = text.slice(0, zone);
  const address = parseBare(text);
  if (address === undefined || address.kind() === "ipv4") return address;
  const bytes = address.toByteArray();
  return isIpv4Mapped(bytes) ? new Address(Uint8Array.from(bytes.slice(12))) : address;
}

/**
 * The subject an address is counted as: an IPv4 address as is, an IPv6 address by its prefix
 * (default /64, the block one subscriber usually holds, so rotating addresses inside it buys
 * nothing).
 */
export function ipSubject(address: Address, ipv6Prefix: number): string {
  if (address.kind() === "ipv4") return address.toString();
  if (ipv6Prefix >= 128) return address.toString();
  const bytes = Uint8Array.from(address.toByteArray());
  for (let bit = ipv6Prefix; bit < 128; bit++) {
    const index = bit >> 3;
    bytes[index] = (bytes[index] as number) & ~(0x80 >> (bit & 7));
  }
  return `${new Address(bytes).toString()}/${ipv6Prefix}`;
}

/** A fast membership test over a list of CIDRs (IPv4 and IPv6 mixed). */
export class CidrSet {
  readonly #ranges: [Address, number][];
  readonly size: number;

  constructor(cidrs: readonly string[]) {
    this.#ranges = cidrs.map((cidr) => parseCidr(cidr));
    this.size = this.#ranges.length;
  }

  has(address: Address | undefined): boolean {
    if (address === undefined) return false;
    for (const [range, bits] of this.#ranges) {
      if (address.match(range, bits)) return true;
    }
    return false;
  }
}

/** Parses "10.0.0.0/8", "2001:db8::/32" or a bare address (a /32 or /128). */
export function parseCidr(text: string): [Address, number] {
  const trimmed = text.trim();
  const slash = trimmed.indexOf("/");
  if (slash !== -1) {
    const range = parseBare(trimmed.slice(0, slash));
    const bitsText = trimmed.slice(slash + 1);
    const bits = /^\d{1,3}$/.test(bitsText) ? Number(bitsText) : Number.NaN;
    if (range === undefined || !(bits <= (range.kind() === "ipv4" ? 32 : 128))) {
      throw new EdgelimitError(
        "EL_BAD_ADDRESS",
        `"${text}" is not an address range; write it as 203.0.113.0/24 or 2001:db8::/32`,
      );
    }
    const bytes = range.toByteArray();
    if (range.kind() === "ipv6" && isIpv4Mapped(bytes) && bits >= 96) {
      return [new Address(Uint8Array.from(bytes.slice(12))), bits - 96];
    }
    return [range, bits];
  }
  const address = parseIp(trimmed);
  if (address === undefined) {
    throw new EdgelimitError(
      "EL_BAD_ADDRESS",
      `"${text}" is not an IP address or range; write it as 203.0.113.7 or 203.0.113.0/24`,
    );
  }
  return [address, address.kind() === "ipv4" ? 32 : 128];
}

/** True when the text is a valid CIDR or address (for schema checks). */
export function isCidr(text: string): boolean {
  try {
    parseCidr(text);
    return true;
  } catch {
    return false;
  }
}

export type { Address };
