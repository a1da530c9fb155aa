/**
 * The protobuf wire format, as far as the rate limit service's messages need it: varints,
 * length-delimited fields, and skipping the fields it does not read (so that a newer Envoy
 * that sends more fields is still understood). Numbers stay below 2^53. Nothing here throws
 * but `EL_RLS_REQUEST`, whatever the bytes.
 */
import { EdgelimitError } from "../core/errors.js";
import { textOfBytes } from "./bytes-text.js";

export const WIRE = { VARINT: 0, FIXED64: 1, LENGTH: 2, FIXED32: 5 } as const;

/**
 * Reads one message field by field, nested messages in place: `enter` makes a length-delimited
 * field's end the reader's end until `leave` restores the outer one, so that decoding a call
 * allocates its fields' values and nothing else.
 */
export class ProtoReader {
  readonly #bytes: Uint8Array;
  #at: number;
  #end: number;

  constructor(bytes: Uint8Array, start = 0, end = bytes.length) {
    this.#bytes = bytes;
    this.#at = start;
    this.#end = end;
  }

  get done(): boolean {
    return this.#at >= this.#end;
  }

  /** The next field's tag: its number times 8 plus its wire type. */
  tag(): number {
    return this.varint();
  }

  varint(): number {
    const bytes = this.#bytes;
    let result = 0;
    let scale = 1;
    for (let shift = 0; shift < 64; shift += 7) {
      if (this.#at >= this.#end) throw malformed("a varint runs past the end of the message");
      const byte = bytes[this.#at++] as number;
      result += (byte & 0x7f) * scale;
      if (byte < 0x80) return result;
      scale *= 128;
    }
    throw malformed("a varint is longer than 10 bytes");
  }

  /** A length-delimited field's end, checked against the message's. */
  #fieldEnd(): number {
    const length = this.varint();
    const end = this.#at + length;
    if (end > this.#end) throw malformed("a field runs past the end of the message");
    return end;
  }

  /**
   * A string field. proto3 says UTF-8, but Envoy sends a header's bytes as it received them:
   * bytes that are not UTF-8 are kept apart, not replaced (see bytes-text.ts).
   */
  string(): string {
    const end = this.#fieldEnd();
    const start = this.#at;
    this.#at = end;
    return shortAscii(this.#bytes, start, end) ?? textOfBytes(this.#bytes.subarray(start, end));
  }

  /** Reads a nested message next: returns the outer end, for `leave` once `done`. */
  enter(): number {
    const end = this.#fieldEnd();
    const outer = this.#end;
    this.#end = end;
    return outer;
  }

  /** Back in the outer message, after the nested one `enter` began. */
  leave(outer: number): void {
    this.#at = this.#end;
    this.#end = outer;
  }

  skip(wireType: number): void {
    switch (wireType) {
      case WIRE.VARINT:
        this.varint();
        return;
      case WIRE.FIXED64:
        this.#advance(8);
        return;
      case WIRE.LENGTH:
        this.#at = this.#fieldEnd();
        return;
      case WIRE.FIXED32:
        this.#advance(4);
        return;
      default:
        throw malformed(`wire type ${wireType} is not one proto3 uses`);
    }
  }

  #advance(count: number): void {
    if (this.#at + count > this.#end) throw malformed("a field runs past the end of the message");
    this.#at += count;
  }
}

/** Longer strings go to the decoder; below this a loop is several times cheaper than a call into it. */
const SHORT_STRING = 32;

/**
 * The text of a short run of ASCII bytes (keys, addresses, paths: most of what Envoy sends);
 * undefined for anything else, which bytes-text.ts decodes.
 */
function shortAscii(bytes: Uint8Array, start: number, end: number): string | undefined {
  if (end - start > SHORT_STRING) return undefined;
  let text = "";
  for (let at = start; at < end; at++) {
    const byte = bytes[at] as number;
    if (byte >= 0x80) return undefined;
    text += String.fromCharCode(byte);
  }
  return text;
}

/** The bytes a varint takes. */
export function varintSize(value: number): number {
  let size = 1;
  for (let rest = value; rest >= 0x80; rest = Math.floor(rest / 128)) size++;
  return size;
}

/** The bytes a length-delimited field of `length` bytes takes, its tag (fields 1-15) included. */
export function lengthFieldSize(length: number): number {
  return 1 + varintSize(length) + length;
}

/**
 * Writes one message into a buffer of the size its encoder worked out first (nested messages
 * are written in place after their length, not built apart and copied), after `prefix` bytes
 * left for the caller (gRPC's 5-byte message prefix).
 */
export class ProtoWriter {
  readonly #bytes: Buffer;
  #length: number;

  constructor(size: number, prefix = 0) {
    this.#bytes = Buffer.allocUnsafe(prefix + size);
    this.#length = prefix;
  }

  /** A varint field; proto3 leaves out zero, so callers skip it for defaults. */
  varintField(field: number, value: number): this {
    this.#varint(field * 8 + WIRE.VARINT);
    this.#varint(value);
    return this;
  }

  /** A string field of `byteLength` UTF-8 bytes. */
  stringField(field: number, value: string, byteLength: number): this {
    this.lengthField(field, byteLength);
    this.#length += this.#bytes.write(value, this.#length, byteLength, "utf8");
    return this;
  }

  /** A length-delimited field's tag and length: its `length` bytes are to be written next. */
  lengthField(field: number, length: number): this {
    this.#varint(field * 8 + WIRE.LENGTH);
    this.#varint(length);
    return this;
  }

  /** The buffer, prefix included; the encoder's sizes must have been exact. */
  finish(): Buffer {
    if (this.#length !== this.#bytes.length) {
      throw new Error(`protobuf writer: ${this.#length} bytes written of ${this.#bytes.length}`);
    }
    return this.#bytes;
  }

  #varint(value: number): void {
    const bytes = this.#bytes;
    let rest = value;
    while (rest >= 0x80) {
      bytes[this.#length++] = (rest % 128) | 0x80;
      rest = Math.floor(rest / 128);
    }
    bytes[this.#length++] = rest;
  }
}

function malformed(detail: string): EdgelimitError {
  return new EdgelimitError("EL_RLS_REQUEST", `malformed protobuf message: ${detail}`);
}
