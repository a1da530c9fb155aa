import ipaddr from "ipaddr.js";
import { EdgelimitError } from "./errors.js";

type Address = ipaddr.IPv4 | ipaddr.IPv6;

const IPV4 =
  /^(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)$/;

/**
 * Parses an address as it appears in a socket, a header or `X-Forwarded-For`: bare, bracketed,
 * with a port (`1.2.3.4:5678`, `[::1]:80`) or a zone (`fe80::1%eth0`, dropped). IPv4-mapped
 * IPv6 (`::ffff:1.2.3.4`) becomes IPv4, so one client has one identity. Undefined when invalid.
 */
export function parseIp(raw: string | undefined): Address | undefined {
  if (raw === undefined) return undefined;
  let text = raw.trim();
  if (IPV4.test(text)) return ipaddr.IPv4.parse(text);
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
  if (!ipaddr.isValid(text)) return undefined;
  try {
    const address = ipaddr.parse(text);
    if (address.kind() === "ipv4") {
      // ipaddr accepts legacy forms ("127.1", "0x7f.1"); only dotted quads are addresses here.
      return IPV4.test(text) ? address : undefined;
    }
    const v6 = address as ipaddr.IPv6;
    return v6.isIPv4MappedAddress() ? v6.toIPv4Address() : v6;
  } catch {
    return undefined;
  }
}

/**
 * The subject an address is counted as: an IPv4 address as is, an IPv6 address by its prefix
 * (default /64, the block one subscriber usually holds, so rotating addresses inside it buys
 * nothing).
 */
export function ipSubject(address: Address, ipv6Prefix: number): string {
  if (address.kind() === "ipv4") return address.toString();
  if (ipv6Prefix >= 128) return address.toString();
  const bytes = address.toByteArray();
  for (let bit = ipv6Prefix; bit < 128; bit++) {
    const index = bit >> 3;
    bytes[index] = (bytes[index] as number) & ~(0x80 >> (bit & 7));
  }
  return `${ipaddr.fromByteArray(bytes).toString()}/${ipv6Prefix}`;
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
      if (range.kind() === address.kind() && address.match(range, bits)) return true;
    }
    return false;
  }
}

/** Parses "10.0.0.0/8", "2001:db8::/32" or a bare address (a /32 or /128). */
export function parseCidr(text: string): [Address, number] {
  const trimmed = text.trim();
  if (trimmed.includes("/")) {
    if (!ipaddr.isValidCIDR(trimmed)) {
      throw new EdgelimitError(
        "EL_BAD_ARGUMENT",
        `"${text}" is not an address range; write it as 203.0.113.0/24 or 2001:db8::/32`,
      );
    }
    const [range, bits] = ipaddr.parseCIDR(trimmed);
    if (range.kind() === "ipv6" && (range as ipaddr.IPv6).isIPv4MappedAddress() && bits >= 96) {
      return [(range as ipaddr.IPv6).toIPv4Address(), bits - 96];
    }
    return [range, bits];
  }
  const address = parseIp(trimmed);
  if (address === undefined) {
    throw new EdgelimitError(
      "EL_BAD_ARGUMENT",
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
