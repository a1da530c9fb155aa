/**
 * gRPC over HTTP/2 as far as a unary server needs it (grpc/grpc PROTOCOL-HTTP2.md): the status
 * codes, the 5-byte message prefix, the one message of a unary call read back from the bytes
 * of its stream (gzip and deflate undone, its size bounded), `grpc-timeout`, and the
 * percent-encoding of `grpc-message`. grpc.ts serves the calls on node:http2 with these.
 */
import { gunzipSync, inflateSync } from "node:zlib";

/** The status codes the service answers with (grpc/grpc doc/statuscodes.md). */
export const STATUS = {
  OK: 0,
  CANCELLED: 1,
  UNKNOWN: 2,
  INVALID_ARGUMENT: 3,
  DEADLINE_EXCEEDED: 4,
  NOT_FOUND: 5,
  RESOURCE_EXHAUSTED: 8,
  UNIMPLEMENTED: 12,
  INTERNAL: 13,
  UNAVAILABLE: 14,
} as const;
export type StatusName = keyof typeof STATUS;

/** A call's end other than OK: its status and what `grpc-message` says. */
export interface Refusal {
  readonly status: StatusName;
  readonly details: string;
}

/** Bytes before each message: a compressed flag, then its length (big-endian). */
export const PREFIX_BYTES = 5;

/**
 * A message encoded after `PREFIX_BYTES` left free (codec.ts's `prefix`), with the prefix
 * written in: not compressed, and its length.
 */
export function framed(frame: Buffer): Buffer {
  frame[0] = 0;
  frame.writeUInt32BE(frame.length - PREFIX_BYTES, 1);
  return frame;
}

/**
 * A refusal as soon as the first prefix read says the message is longer than `maxBytes` (the
 * rest of it is then never buffered), or the bytes so far hold more than one message's worth.
 */
export function tooLarge(received: Buffer, total: number, maxBytes: number): Refusal | undefined {
  const declared = received.length >= 5 ? received.readUInt32BE(1) : 0;
  if (declared <= maxBytes && total <= maxBytes + 5) return undefined;
  return {
    status: "RESOURCE_EXHAUSTED",
    details: `Received message larger than max (${Math.max(declared, total - 5)} vs. ${maxBytes})`,
  };
}

/**
 * The one message of a unary call from all the bytes its stream carried, decompressed per
 * `encoding` (its `grpc-encoding` header), or why there is none.
 */
export function unaryMessage(
  bytes: Buffer,
  encoding: string | undefined,
  maxBytes: number,
  path: string,
): Buffer | Refusal {
  if (bytes.length === 0) {
    return { status: "UNIMPLEMENTED", details: `Received no request message for ${path}` };
  }
  if (bytes.length < 5 || bytes.length < 5 + bytes.readUInt32BE(1)) {
    return { status: "INTERNAL", details: "The request ended inside a message" };
  }
  const length = bytes.readUInt32BE(1);
  if (bytes.length > 5 + length) {
    return { status: "UNIMPLEMENTED", details: `Received a second request message for ${path}` };
  }
  const message = bytes.subarray(5);
  if (bytes[0] === 0) return message;
  if (bytes[0] !== 1) return { status: "INTERNAL", details: "Invalid message flags" };
  const inflate =
    encoding === "gzip" ? gunzipSync : encoding === "deflate" ? inflateSync : undefined;
  if (inflate === undefined) {
    return encoding === undefined || encoding === "identity"
      ? { status: "INTERNAL", details: "A compressed message without grpc-encoding" }
      : {
          status: "UNIMPLEMENTED",
          details: `Received message compressed with unsupported encoding "${encoding}"`,
        };
  }
  try {
    return inflate(message, { maxOutputLength: maxBytes });
  } catch (error) {
    const code = (error as { code?: string }).code;
    return code === "ERR_BUFFER_TOO_LARGE"
      ? {
          status: "RESOURCE_EXHAUSTED",
          details: `Received message that decompresses to a size larger than ${maxBytes}`,
        }
      : { status: "INTERNAL", details: `The message's ${encoding} could not be undone` };
  }
}

const TIMEOUT_UNITS: Readonly<Partial<Record<string, number>>> = {
  H: 3_600_000,
  M: 60_000,
  S: 1_000,
  m: 1,
  u: 0.001,
  n: 0.000_001,
};

/**
 * `grpc-timeout` (up to 8 digits and a unit) in milliseconds; undefined without one, NaN when
 * it is not one. Envoy sends one with every call: read without a regular expression.
 */
export function timeoutMs(header: string | string[] | undefined): number | undefined {
  if (header === undefined) return undefined;
  const text = typeof header === "string" ? header : header.join(",");
  const digits = text.length - 1;
  if (digits < 1 || digits > 8) return Number.NaN;
  let value = 0;
  for (let at = 0; at < digits; at++) {
    const digit = text.charCodeAt(at) - 48;
    if (digit < 0 || digit > 9) return Number.NaN;
    value = value * 10 + digit;
  }
  const unit = TIMEOUT_UNITS[text.charAt(digits)];
  return unit === undefined ? Number.NaN : value * unit;
}

/**
 * `grpc-message` as the protocol writes it: UTF-8, with `%` and every byte outside printable
 * ASCII as `%XX` (a lone surrogate becomes U+FFFD rather than an error).
 */
export function percentEncoded(text: string): string {
  if (/^[\x20-\x24\x26-\x7e]*$/.test(text)) return text;
  let encoded = "";
  for (const byte of Buffer.from(text, "utf8")) {
    encoded +=
      byte >= 0x20 && byte <= 0x7e && byte !== 0x25
        ? String.fromCharCode(byte)
        : `%${byte.toString(16).toUpperCase().padStart(2, "0")}`;
  }
  return encoded;
}
