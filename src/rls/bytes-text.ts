/**
 * Text from bytes that should be UTF-8 and may not be: a descriptor's value is a header's bytes
 * as the proxy received them, and HTTP allows any byte from 0x80 up in a header (Envoy sends
 * them in the proto's string fields as they are: envoyproxy/envoy#22996). Decoding them
 * with U+FFFD in place of every byte that is not UTF-8 would make `0xff` and `0xfe` one value,
 * one counter. Refusing them would be worse: Envoy admits a request whose call fails (its
 * default `failure_mode_deny: false`), so one such byte in a header would escape the limit.
 *
 * So each byte that does not begin a valid UTF-8 sequence becomes the lone surrogate
 * U+DC00 + byte (U+DC80 to U+DCFF), as Python's `surrogateescape` does. Valid UTF-8 never
 * decodes to a surrogate, so different bytes always give different text, and text decoded from
 * valid UTF-8 is as before. Counter keys write a lone surrogate as an escape of its own
 * (core/keys.ts), so a store that writes keys as UTF-8 keeps the values apart too.
 */

/**
 * Refuses what is not UTF-8 rather than replacing it; keeps a leading byte order mark, which is
 * part of the value (dropping it would make "\ufeffa" and "a" one counter). Decoding without
 * `stream` keeps no state from one call to the next.
 */
const STRICT_UTF8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

export function textOfBytes(bytes: Uint8Array): string {
  try {
    return STRICT_UTF8.decode(bytes);
  } catch {
    return withEscapedBytes(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength));
  }
}

function withEscapedBytes(buffer: Buffer): string {
  let text = "";
  let runStart = 0;
  let at = 0;
  while (at < buffer.length) {
    const length = sequenceLengthAt(buffer, at);
    if (length > 0) {
      at += length;
      continue;
    }
    text += buffer.toString("utf8", runStart, at);
    text += String.fromCharCode(0xdc00 + (buffer[at] as number));
    at++;
    runStart = at;
  }
  return text + buffer.toString("utf8", runStart, at);
}

/**
 * The well-formed UTF-8 sequences (The Unicode Standard, table 3-7): the lead bytes, the
 * sequence's length, and the range of its second byte; the bytes after it are 0x80 to 0xBF.
 */
const SEQUENCES: readonly (readonly [number, number, number, number, number])[] = [
  [0xc2, 0xdf, 2, 0x80, 0xbf],
  [0xe0, 0xe0, 3, 0xa0, 0xbf],
  [0xe1, 0xec, 3, 0x80, 0xbf],
  [0xed, 0xed, 3, 0x80, 0x9f],
  [0xee, 0xef, 3, 0x80, 0xbf],
  [0xf0, 0xf0, 4, 0x90, 0xbf],
  [0xf1, 0xf3, 4, 0x80, 0xbf],
  [0xf4, 0xf4, 4, 0x80, 0x8f],
];

/** The length of the well-formed UTF-8 sequence at `at`, or 0 when none begins there. */
function sequenceLengthAt(bytes: Uint8Array, at: number): number {
  const first = bytes[at] as number;
  if (first < 0x80) return 1;
  const shape = SEQUENCES.find(([from, to]) => first >= from && first <= to);
  if (shape === undefined) return 0;
  const [, , length, low, high] = shape;
  if (at + length > bytes.length) return 0;
  const second = bytes[at + 1] as number;
  if (second < low || second > high) return 0;
  for (let next = at + 2; next < at + length; next++) {
    const byte = bytes[next] as number;
    if (byte < 0x80 || byte > 0xbf) return 0;
  }
  return length;
}
