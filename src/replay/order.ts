import { AddressCheck } from "./address.js";
import type { SeenLines } from "./errors-seen.js";
import type { LineParser } from "./formats/index.js";
import type { LineSource } from "./reader.js";
import { isFailure, type LogRecord } from "./record.js";

function before(a: LogRecord, b: LogRecord): boolean {
  return a.time < b.time || (a.time === b.time && a.line < b.line);
}

/** A binary min-heap of records by time (then line, so equal times keep the file's order). */
class RecordHeap {
  readonly items: LogRecord[] = [];

  get size(): number {
    return this.items.length;
  }

  peek(): LogRecord | undefined {
    return this.items[0];
  }

  push(record: LogRecord): void {
    const items = this.items;
    let i = items.length;
    items.push(record);
    while (i > 0) {
      const parent = (i - 1) >> 1;
      const above = items[parent] as LogRecord;
      if (!before(record, above)) break;
      items[i] = above;
      i = parent;
    }
    items[i] = record;
  }

  pop(): LogRecord {
    const items = this.items;
    const top = items[0] as LogRecord;
    const last = items.pop() as LogRecord;
    const size = items.length;
    if (size === 0) return top;
    let i = 0;
    for (;;) {
      const left = 2 * i + 1;
      if (left >= size) break;
      const right = left + 1;
      let child = left;
      if (right < size && before(items[right] as LogRecord, items[left] as LogRecord))
        child = right;
      if (!before(items[child] as LogRecord, last)) break;
      items[i] = items[child] as LogRecord;
      i = child;
    }
    items[i] = last;
    return top;
  }
}

/**
 * One input, parsed and put in time order within a bounded window: a record is held until a
 * record `windowMs` newer has been read, so memory is bounded by the window's traffic, not by
 * the file. A line older than everything already released is late: counted, and replayed at
 * the time replay has reached (never sent back in time, which no limiter sees either). A line
 * whose client address the limiter could not read is malformed, like a line with no time.
 */
export class OrderedSource {
  readonly index: number;
  readonly lines: LineSource;
  readonly #parser: LineParser;
  readonly #windowMs: number;
  readonly #seen: SeenLines;
  readonly #addresses = new AddressCheck();
  readonly #heap = new RecordHeap();
  #ready: LogRecord[] = [];
  #readyAt = 0;
  #lineNumber = 0;
  #newest = Number.NEGATIVE_INFINITY;
  #released = Number.NEGATIVE_INFINITY;
  #ended = false;

  constructor(
    index: number,
    lines: LineSource,
    parser: LineParser,
    windowMs: number,
    seen: SeenLines,
    firstLines?: string[],
  ) {
    this.index = index;
    this.lines = lines;
    this.#parser = parser;
    this.#windowMs = windowMs;
    this.#seen = seen;
    if (firstLines !== undefined) this.#accept(firstLines);
  }

  /** Records held for reordering now (bounded by the window's traffic). */
  get held(): number {
    return this.#heap.size;
  }

  /** The next record in time order, reading more when needed; undefined at the end. */
  async head(): Promise<LogRecord | undefined> {
    while (this.#readyAt >= this.#ready.length) {
      if (this.#ended) return undefined;
      this.#ready = [];
      this.#readyAt = 0;
      const lines = await this.lines.next();
      if (lines === undefined) {
        this.#ended = true;
        while (this.#heap.size > 0) this.#release(this.#heap.pop());
      } else {
        this.#accept(lines);
      }
    }
    return this.#ready[this.#readyAt];
  }

  /** The head, taken; only after `head()` resolved to a record. */
  take(): LogRecord {
    return this.#ready[this.#readyAt++] as LogRecord;
  }

  /** Every record now ready, taken at once (the one-input fast path). */
  takeAll(): LogRecord[] {
    const ready = this.#readyAt === 0 ? this.#ready : this.#ready.slice(this.#readyAt);
    this.#ready = [];
    this.#readyAt = 0;
    return ready;
  }

  #accept(lines: readonly string[]): void {
    const heap = this.#heap;
    const parser = this.#parser;
    const windowMs = this.#windowMs;
    const seen = this.#seen;
    const lateness = seen.lateness;
    for (let i = 0; i < lines.length; i++) {
      const text = lines[i] as string;
      const lineNumber = ++this.#lineNumber;
      if (text.length === 0) continue;
      const result = parser.parse(text, lineNumber);
      if (result === null) continue;
      if (isFailure(result)) {
        seen.malformed.add(this.lines.name, lineNumber, result.failure, text);
        continue;
      }
      if (result.ip !== undefined && !this.#addresses.valid(result.ip)) {
        seen.malformed.add(
          this.lines.name,
          lineNumber,
          `"${result.ip}" is not an IP address`,
          text,
        );
        continue;
      }
      if (result.truncated !== undefined) {
        seen.truncated.add(this.lines.name, lineNumber, result.truncated, text);
      }
      result.source = this.index;
      if (result.time < this.#newest - windowMs) {
        lateness.late++;
        const behind = this.#released - result.time;
        if (behind > lateness.maxBehindMs) lateness.maxBehindMs = behind;
      }
      if (result.time > this.#newest) this.#newest = result.time;
      if (result.time < this.#released) result.time = this.#released;
      heap.push(result);
      const ripe = this.#newest - windowMs;
      while (heap.size > 0 && (heap.peek() as LogRecord).time <= ripe) this.#release(heap.pop());
    }
  }

  #release(record: LogRecord): void {
    this.#released = record.time;
    this.#ready.push(record);
  }
}

/**
 * Several inputs merged by time: each is ordered on its own (OrderedSource), and the merge
 * always takes the earliest head, so a day of CloudFront files from many edge locations is
 * replayed as one stream. Yields batches to keep the per-record cost free of promises.
 */
export class MergedSources {
  readonly #sources: OrderedSource[];

  constructor(sources: OrderedSource[]) {
    this.#sources = [...sources];
  }

  async next(maxBatch = 4096): Promise<LogRecord[] | undefined> {
    const sources = this.#sources;
    const out: LogRecord[] = [];
    while (out.length < maxBatch) {
      let earliest: OrderedSource | undefined;
      let earliestRecord: LogRecord | undefined;
      for (let i = 0; i < sources.length; i++) {
        const source = sources[i] as OrderedSource;
        const head = await source.head();
        if (head === undefined) {
          sources.splice(i, 1);
          i--;
          continue;
        }
        if (earliestRecord === undefined || before2(head, earliestRecord)) {
          earliest = source;
          earliestRecord = head;
        }
      }
      if (earliest === undefined) break;
      if (sources.length === 1) {
        if (out.length === 0) return earliest.takeAll();
        break;
      }
      out.push(earliest.take());
    }
    return out.length === 0 ? undefined : out;
  }
}

/** Earlier in time, then by input order (a tie between files keeps the command line's order). */
function before2(a: LogRecord, b: LogRecord): boolean {
  return a.time < b.time || (a.time === b.time && a.source < b.source);
}
