import fc from "fast-check";
import ipaddr from "ipaddr.js";
import { describe, expect, it } from "vitest";
import { CidrSet, ipSubject, ipv4Key, isCidr, parseCidr, parseIp } from "../../src/core/ip.js";

// ipaddr.js is the oracle: edgelimit's own parser must agree with it on every well-formed
// address and refuse what it refuses (and, stricter, the legacy IPv4 forms it accepts).
const RUNS = 2000;

const ipv4Text = fc
  .tuple(fc.nat(255), fc.nat(255), fc.nat(255), fc.nat(255))
  .map((parts) => parts.join("."));

/** IPv6 text written the many ways one address can be: zeros, `::`, case, leading zeros. */
const ipv6Text = fc
  .tuple(
    fc.array(fc.oneof(fc.constant(0), fc.constant(0xffff), fc.nat(0xffff)), {
      minLength: 8,
      maxLength: 8,
    }),
    fc.boolean(),
    fc.boolean(),
    fc.nat(7),
    fc.nat(8),
  )
  .map(([words, upper, padded, gapStart, gapLength]) => {
    const hex = words.map((word) => {
      const text = word.toString(16);
      const written = padded ? text.padStart(4, "0") : text;
      return upper ? written.toUpperCase() : written;
    });
    const end = Math.min(8, gapStart + gapLength);
    const zerosOnly = words.slice(gapStart, end).every((word) => word === 0);
    if (end - gapStart < 1 || !zerosOnly) return hex.join(":");
    return `${hex.slice(0, gapStart).join(":")}::${hex.slice(end).join(":")}`;
  });

const embeddedIpv4Text = fc
  .tuple(fc.oneof(fc.constant("::ffff:"), fc.constant("::"), fc.constant("64:ff9b::")), ipv4Text)
  .map(([prefix, quad]) => prefix + quad);

const anyAddressText = fc.oneof(ipv4Text, ipv6Text, embeddedIpv4Text);

function oracle(text: string): ipaddr.IPv4 | ipaddr.IPv6 | undefined {
  if (!ipaddr.isValid(text)) return undefined;
  const parsed = ipaddr.parse(text);
  if (parsed.kind() === "ipv6" && (parsed as ipaddr.IPv6).isIPv4MappedAddress())
    return (parsed as ipaddr.IPv6).toIPv4Address();
  return parsed;
}

describe("the address parser against ipaddr.js", () => {
  it("agrees on kind and canonical form for random IPv4 and IPv6 addresses", () => {
    fc.assert(
      fc.property(anyAddressText, (text) => {
        const expected = oracle(text);
        const actual = parseIp(text);
        expect(expected).toBeDefined();
        expect(actual?.kind()).toBe(expected?.kind());
        expect(actual?.toString()).toBe(expected?.toString());
      }),
      { numRuns: RUNS },
    );
  });

  it("reads brackets, ports and zones around the same address", () => {
    fc.assert(
      fc.property(ipv6Text, fc.nat(65535), (text, port) => {
        const expected = oracle(text)?.toString();
        expect(parseIp(`[${text}]:${port}`)?.toString()).toBe(expected);
        expect(parseIp(`${text}%eth0`)?.toString()).toBe(expected);
        expect(parseIp(` [${text}] `)?.toString()).toBe(expected);
      }),
      { numRuns: RUNS / 4 },
    );
    fc.assert(
      fc.property(ipv4Text, fc.nat(65535), (text, port) => {
        expect(parseIp(`${text}:${port}`)?.toString()).toBe(text);
      }),
      { numRuns: RUNS / 4 },
    );
  });

  it("masks IPv6 subjects to their prefix as ipaddr.js does", () => {
    fc.assert(
      fc.property(ipv6Text, fc.integer({ min: 0, max: 128 }), (text, prefix) => {
        const address = parseIp(text);
        fc.pre(address !== undefined && address.kind() === "ipv6");
        const expected =
          prefix >= 128
            ? ipaddr.parse(text).toString()
            : `${ipaddr.IPv6.networkAddressFromCIDR(`${text}/${prefix}`).toString()}/${prefix}`;
        expect(ipSubject(address as NonNullable<typeof address>, prefix)).toBe(expected);
      }),
      { numRuns: RUNS },
    );
  });

  it("matches CIDR ranges as ipaddr.js does", () => {
    const sameKindPair = fc.oneof(
      fc.tuple(ipv4Text, ipv4Text, fc.integer({ min: 0, max: 32 })),
      fc.tuple(ipv6Text, ipv6Text, fc.integer({ min: 0, max: 128 })),
    );
    fc.assert(
      fc.property(sameKindPair, fc.boolean(), ([rangeText, addressText, bits], related) => {
        // Half the time, derive the address from the range so that matches are common.
        const candidate = related ? rangeText : addressText;
        const [range, rangeBits] = ipaddr.parseCIDR(`${rangeText}/${bits}`);
        const oracleAddress = ipaddr.parse(candidate);
        const mapped =
          range.kind() === "ipv6" && (range as ipaddr.IPv6).isIPv4MappedAddress() && bits >= 96;
        fc.pre(
          !mapped &&
            !(
              oracleAddress.kind() === "ipv6" &&
              (oracleAddress as ipaddr.IPv6).isIPv4MappedAddress()
            ),
        );
        const expected = oracleAddress.match(range, rangeBits);
        expect(new CidrSet([`${rangeText}/${bits}`]).has(parseIp(candidate))).toBe(expected);
        expect(parseCidr(`${rangeText}/${bits}`)[1]).toBe(bits);
      }),
      { numRuns: RUNS },
    );
  });

  it("refuses what ipaddr.js refuses", () => {
    const alphabet = fc.constantFrom(..."0123456789abcdefABCDEF:.".split(""));
    const garbage = fc.oneof(
      fc.string({ unit: alphabet, maxLength: 45 }),
      anyAddressText.chain((text) =>
        fc
          .tuple(fc.nat(text.length), alphabet)
          .map(([at, inserted]) => text.slice(0, at) + inserted + text.slice(at)),
      ),
      anyAddressText.chain((text) =>
        fc.nat(Math.max(0, text.length - 1)).map((at) => text.slice(0, at) + text.slice(at + 1)),
      ),
    );
    let refused = 0;
    fc.assert(
      fc.property(garbage, (text) => {
        // Only ports need a colon-free IPv4 and only IPv4 legacy forms differ on purpose.
        fc.pre(!text.includes(":") || text.split(":").length > 2);
        const legacyIpv4 =
          !text.includes(":") &&
          ipaddr.IPv4.isValid(text) &&
          !ipaddr.IPv4.isValidFourPartDecimal(text);
        // ipaddr reads the IPv4 tail of an IPv6 address in legacy forms too ("::1.02.3.4").
        const legacyTail = /[:.]0\d/.test(text) || /(^|[:.])0x/i.test(text);
        fc.pre(!legacyIpv4 && !legacyTail);
        const expected = oracle(text);
        const actual = parseIp(text);
        if (expected === undefined) refused++;
        expect(actual?.toString()).toBe(expected?.toString());
      }),
      { numRuns: RUNS },
    );
    expect(refused).toBeGreaterThan(RUNS / 10);
  });

  it("refuses legacy IPv4 forms that ipaddr.js accepts", () => {
    for (const legacy of ["127.1", "0x7f.0.0.1", "017.0.0.1", "2130706433", "1.2.3", "01.2.3.4"]) {
      expect(parseIp(legacy)).toBeUndefined();
    }
    expect(isCidr("127.1/8")).toBe(false);
    expect(isCidr("10.0.0.0/33")).toBe(false);
    expect(isCidr("2001:db8::/129")).toBe(false);
    expect(isCidr("2001:db8::/64")).toBe(true);
  });

  it("reads dotted quads at their edges and nothing around them", () => {
    for (const [text, canonical] of [
      ["0.0.0.0", "0.0.0.0"],
      ["255.255.255.255", "255.255.255.255"],
      ["10.0.0.1", "10.0.0.1"],
      ["::ffff:192.0.2.1", "192.0.2.1"],
    ]) {
      expect(parseIp(text as string)?.toString()).toBe(canonical);
    }
    for (const bad of [
      "1.2.3.4.",
      ".1.2.3",
      "1..2.3",
      "256.1.1.1",
      "1.2.3.4.5",
      "1.2.3.-4",
      "1.2.3.4a",
      "",
      "....",
    ]) {
      expect(parseIp(bad)).toBeUndefined();
    }
  });

  it("turns an IPv4-mapped range into the IPv4 range", () => {
    const [range, bits] = parseCidr("::ffff:10.0.0.0/104");
    expect([range.kind(), range.toString(), bits]).toEqual(["ipv4", "10.0.0.0", 8]);
    expect(new CidrSet(["::ffff:10.0.0.0/104"]).has(parseIp("10.1.2.3"))).toBe(true);
    expect(new CidrSet(["::ffff:10.0.0.0/104"]).has(parseIp("11.1.2.3"))).toBe(false);
  });
});

describe("ipv4Key", () => {
  /** Near-quads: leading zeros, parts above 255, spaces, too few or too many parts, ports. */
  const nearQuad = fc
    .array(
      fc.oneof(
        fc.nat(300).map(String),
        fc.nat(255).map((n) => `0${n}`),
        fc.constantFrom("", " 1", "1 ", "a", "-1", "1:80", "1e2", "0x1"),
      ),
      { minLength: 1, maxLength: 6 },
    )
    .map((parts) => parts.join("."));

  it("numbers exactly the texts that parseIp reads as that same IPv4 address", () => {
    fc.assert(
      fc.property(fc.oneof(ipv4Text, nearQuad, fc.string({ maxLength: 16 })), (text) => {
        const key = ipv4Key(text);
        const address = parseIp(text);
        const canonical = address?.kind() === "ipv4" && address.toString() === text;
        expect(key !== undefined).toBe(canonical);
        if (key !== undefined && address !== undefined) {
          // The number is the address's four bytes: one number per address, so per text.
          const bytes = address.toByteArray();
          const expected =
            ((bytes[0] as number) << 24) |
            ((bytes[1] as number) << 16) |
            ((bytes[2] as number) << 8) |
            (bytes[3] as number);
          expect(key).toBe(expected);
        }
      }),
      { numRuns: RUNS },
    );
  });

  it("is a small integer for every address, the highest included", () => {
    expect(ipv4Key("255.255.255.255")).toBe(-1);
    expect(ipv4Key("0.0.0.0")).toBe(0);
    expect(ipv4Key("128.0.0.1")).toBe(-2147483647);
    expect(ipv4Key("10.9.3.4")).toBe((10 << 24) | (9 << 16) | (3 << 8) | 4);
    expect(ipv4Key(" 10.9.3.4")).toBeUndefined();
    expect(ipv4Key("10.9.3.04")).toBeUndefined();
  });
});
