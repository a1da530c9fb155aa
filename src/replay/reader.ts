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

/**
 * The longest line read, in characters (1 MiB). Access log lines are a few hundred characters,
 * a few KB with a long URL; a longer "line" is a file that is not a log (or has no newlines),
 * and holding it whole would cost memory and time without bound.
 */
export const MAX_LINE_CHARS = 1 << 20;

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

/**
 * Lines from decoded chunks. Only a chunk's own text is searched for its last newline; the
 * start of an unfinished line is carried in pieces, joined once its end arrives, and never
 * beyond MAX_LINE_CHARS.
 */
class StreamLineSource implements LineSource {
  readonly name: string;
  readonly size: number | undefined;
  bytesRead = 0;
  readonly #chunks: AsyncGenerator<Buffer>;
  readonly #decoder = new StringDecoder("utf8");
  /** The unfinished line, in the pieces it came in. */
  #carry: string[] = [];
  #carried = 0;
  /** Lines returned so far, to name a line in an error. */
  #lines = 0;
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
        const last = this.#take(this.#decoder.end());
        this.#check(last.length, 1);
        return last === "" ? undefined : [stripCr(last)];
      }
      const text = this.#decoder.write(chunk.value);
      const lastNewline = text.lastIndexOf("\n");
      if (lastNewline === -1) {
        this.#carry.push(text);
        this.#carried += text.length;
        this.#check(this.#carried, 1);
        continue;
      }
      const lines = this.#take(text.slice(0, lastNewline)).split("\n");
      const rest = text.slice(lastNewline + 1);
      this.#carry.push(rest);
      this.#carried = rest.length;
      for (let i = 0; i < lines.length; i++) {
        const line = lines[i] as string;
        if (line.length > MAX_LINE_CHARS) this.#check(line.length, i + 1);
        if (line.charCodeAt(line.length - 1) === 13) lines[i] = line.slice(0, -1);
      }
      this.#lines += lines.length;
      this.#check(this.#carried, 1);
      return lines;
    }
  }

  /** The carried start of a line and `text`, as one string; the carry is then empty. */
  #take(text: string): string {
    const carry = this.#carry;
    const joined =
      carry.length === 0 ? text : carry.length === 1 ? carry[0] + text : carry.join("") + text;
    this.#carry = [];
    this.#carried = 0;
    return joined;
  }

  /** Refuses a line longer than MAX_LINE_CHARS: the `nth` line from those returned so far. */
  #check(length: number, nth: number): void {
    if (length <= MAX_LINE_CHARS) return;
    throw new ReplayError(
      "EL_REPLAY_INPUT",
      `${this.name}:${this.#lines + nth}: a line longer than ${MAX_LINE_CHARS.toLocaleString("en-US")} characters (1 MiB), which no access log writes; is this file a log in the format replay reads (--format)?`,
    );
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
