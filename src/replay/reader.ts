import { createReadStream, statSync } from "node:fs";
import { Readable } from "node:stream";
import { StringDecoder } from "node:string_decoder";
import { createGunzip } from "node:zlib";
import { ReplayError } from "./errors.js";

/** One input's lines, in batches as they are read: a file, a gzip file, or stdin (`-`). */
export interface LineSource {
  readonly name: string;
  /** Bytes on disk (compressed, for a .gz), for the progress ETA; undefined for stdin. */
  readonly size: number | undefined;
  /** Bytes read from disk so far (compressed). */
  readonly bytesRead: number;
  /** The next complete lines (without `\n` or `\r\n`); undefined at the end. */
  next(): Promise<string[] | undefined>;
}

const CHUNK_BYTES = 1 << 20;

/** Decompresses when the data starts with the gzip magic, whatever the file is called. */
async function* decoded(
  raw: AsyncIterable<Buffer>,
  onBytes: (count: number) => void,
): AsyncGenerator<Buffer> {
  const iterator = raw[Symbol.asyncIterator]();
  const first = await iterator.next();
  if (first.done === true) return;
  const head = first.value;
  async function* all(): AsyncGenerator<Buffer> {
    onBytes(head.length);
    yield head;
    for (;;) {
      const chunk = await iterator.next();
      if (chunk.done === true) return;
      onBytes(chunk.value.length);
      yield chunk.value;
    }
  }
  if (head[0] !== 0x1f || head[1] !== 0x8b) {
    yield* all();
    return;
  }
  const input = Readable.from(all());
  const gunzip = createGunzip({ chunkSize: CHUNK_BYTES });
  input.on("error", (error) => gunzip.destroy(error));
  input.pipe(gunzip);
  yield* gunzip as AsyncIterable<Buffer>;
}

class StreamLineSource implements LineSource {
  readonly name: string;
  readonly size: number | undefined;
  bytesRead = 0;
  readonly #chunks: AsyncGenerator<Buffer>;
  readonly #decoder = new StringDecoder("utf8");
  #carry = "";
  #ended = false;

  constructor(name: string, size: number | undefined, raw: AsyncIterable<Buffer>) {
    this.name = name;
    this.size = size;
    this.#chunks = decoded(raw, (count) => {
      this.bytesRead += count;
    });
  }

  async next(): Promise<string[] | undefined> {
    for (;;) {
      if (this.#ended) return undefined;
      let chunk: IteratorResult<Buffer>;
      try {
        chunk = await this.#chunks.next();
      } catch (error) {
        throw new ReplayError(
          "EL_REPLAY_INPUT",
          `${this.name}: ${error instanceof Error ? error.message : String(error)}`,
        );
      }
      if (chunk.done === true) {
        this.#ended = true;
        const last = this.#carry + this.#decoder.end();
        this.#carry = "";
        return last === "" ? undefined : [stripCr(last)];
      }
      const text = this.#carry + this.#decoder.write(chunk.value);
      const lastNewline = text.lastIndexOf("\n");
      if (lastNewline === -1) {
        this.#carry = text;
        continue;
      }
      this.#carry = text.slice(lastNewline + 1);
      const lines = text.slice(0, lastNewline).split("\n");
      for (let i = 0; i < lines.length; i++) {
        const line = lines[i] as string;
        if (line.charCodeAt(line.length - 1) === 13) lines[i] = line.slice(0, -1);
      }
      return lines;
    }
  }
}

function stripCr(line: string): string {
  return line.charCodeAt(line.length - 1) === 13 ? line.slice(0, -1) : line;
}

/** Opens one input; a missing or unreadable file is an error naming it. */
export function openSource(name: string, stdin: NodeJS.ReadableStream = process.stdin): LineSource {
  if (name === "-") {
    return new StreamLineSource("stdin", undefined, stdin as AsyncIterable<Buffer>);
  }
  let size: number;
  try {
    const stats = statSync(name);
    if (stats.isDirectory()) throw new Error("is a directory");
    size = stats.size;
  } catch (error) {
    throw new ReplayError(
      "EL_REPLAY_INPUT",
      `${name}: cannot read (${error instanceof Error ? error.message : String(error)})`,
    );
  }
  return new StreamLineSource(name, size, createReadStream(name, { highWaterMark: CHUNK_BYTES }));
}
