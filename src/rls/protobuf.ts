/**
 * The protobuf wire format, as far as the rate limit service's messages need it: varints,
 * length-delimited fields, and skipping the fields it does not read (so that a newer Envoy
 * that sends more fields is still understood). Numbers stay below 2^53. Nothing here throws
 * but `EL_RLS_REQUEST`, whatever the bytes.
 */
import { EdgelimitError } from "../core/errors.js";
import { textOfBytes } from "./bytes-text.js";

export const WIRE = { VARINT: 0, FIXED64: 1, LENGTH: 2, FIXED32: 5 } as const;

/** Reads one message (or a nested message's bytes) field by field. */
export class ProtoReader {
  readonly #bytes: Uint8Array;
  #at: number;
  readonly #end: number;

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

  /** A length-delimited field's bounds, leaving the reader after it. */
  span(): { readonly start: number; readonly end: number } {
    const length = this.varint();
    const start = this.#at;
    const end = start + length;
    if (end > this.#end) throw malformed("a field runs past the end of the message");
    this.#at = end;
    return { start, end };
  }

  /**
   * A string field. proto3 says UTF-8, but Envoy sends a header's bytes as it received them:
   * bytes that are not UTF-8 are kept apart, not replaced (see bytes-text.ts).
   */
  string(): string {
    const { start, end } = this.span();
    return textOfBytes(this.#bytes.subarray(start, end));
  }

  /** A reader over a nested message. */
  message(): ProtoReader {
    const { start, end } = this.span();
    return new ProtoReader(this.#bytes, start, end);
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
        this.span();
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

/** Writes one message; nested messages are written by a writer of their own and added as bytes. */
export class ProtoWriter {
  #bytes = Buffer.allocUnsafe(64);
  #length = 0;

  /** A varint field; proto3 leaves out zero, so callers skip it for defaults. */
  varintField(field: number, value: number): this {
    this.#varint(field * 8 + WIRE.VARINT);
    this.#varint(value);
    return this;
  }

  stringField(field: number, value: string): this {
    const length = Buffer.byteLength(value, "utf8");
    this.#varint(field * 8 + WIRE.LENGTH);
    this.#varint(length);
    this.#reserve(length);
    this.#length += this.#bytes.write(value, this.#length, "utf8");
    return this;
  }

  bytesField(field: number, value: Uint8Array): this {
    this.#varint(field * 8 + WIRE.LENGTH);
    this.#varint(value.length);
    this.#reserve(value.length);
    this.#bytes.set(value, this.#length);
    this.#length += value.length;
    return this;
  }

  finish(): Buffer {
    return this.#bytes.subarray(0, this.#length);
  }

  #varint(value: number): void {
    this.#reserve(10);
    const bytes = this.#bytes;
    let rest = value;
    while (rest >= 0x80) {
      bytes[this.#length++] = (rest % 128) | 0x80;
      rest = Math.floor(rest / 128);
    }
    bytes[this.#length++] = rest;
  }

  #reserve(count: number): void {
    if (this.#length + count <= this.#bytes.length) return;
    const grown = Buffer.allocUnsafe(Math.max(this.#bytes.length * 2, this.#length + count));
    this.#bytes.copy(grown, 0, 0, this.#length);
    this.#bytes = grown;
  }
}

function malformed(detail: string): EdgelimitError {
  return new EdgelimitError("EL_RLS_REQUEST", `malformed protobuf message: ${detail}`);
}
