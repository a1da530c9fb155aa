import { ReplayError } from "../errors.js";
import { failure, makeRecord, type ParseResult } from "../record.js";
import { orUndefined, parseJsonTime, pathOfTarget } from "./text.js";
import type { FormatOptions, LineParser, LogFormat } from "./types.js";

/** What a JSON line must or may say, and the field names assumed when `--field` gives none. */
export const JSON_FIELDS = {
  ip: "ip",
  time: "time",
  method: "method",
  path: "path",
  query: "",
  userAgent: "user_agent",
  status: "status",
} as const;

export type JsonField = keyof typeof JSON_FIELDS;

function reader(path: string): (object: Record<string, unknown>) => unknown {
  if (path === "") return () => undefined;
  const parts = path.split(".");
  if (parts.length === 1) return (object) => object[path];
  return (object) => {
    let value: unknown = object;
    for (const part of parts) {
      if (value === null || typeof value !== "object") return undefined;
      value = (value as Record<string, unknown>)[part];
    }
    return value;
  };
}

function text(value: unknown): string | undefined {
  if (typeof value === "string") return orUndefined(value);
  if (typeof value === "number") return String(value);
  return undefined;
}

/**
 * One JSON object per line, read through a field map: each record field names the log's field
 * (dotted for nested objects). Cloudflare's Logpush is this with its own map (cloudflare.ts).
 */
export class JsonLinesParser implements LineParser {
  readonly #get: Record<JsonField | "user" | "plan", (object: Record<string, unknown>) => unknown>;

  constructor(map: Readonly<Record<JsonField, string>>, options: FormatOptions) {
    this.#get = {
      ip: reader(map.ip),
      time: reader(map.time),
      method: reader(map.method),
      path: reader(map.path),
      query: reader(map.query),
      userAgent: reader(map.userAgent),
      status: reader(map.status),
      user: reader(options.userField ?? ""),
      plan: reader(options.planField ?? ""),
    };
  }

  parse(line: string, lineNumber: number): ParseResult {
    const first = line.charCodeAt(0);
    if (first !== 123) return line.trim() === "" ? null : failure("not a JSON object");
    let object: Record<string, unknown>;
    try {
      object = JSON.parse(line) as Record<string, unknown>;
    } catch {
      return failure("invalid JSON");
    }
    const get = this.#get;
    const time = parseJsonTime(get.time(object));
    if (Number.isNaN(time)) return failure(`no usable time (${JSON.stringify(get.time(object))})`);
    const target = text(get.path(object));
    if (target === undefined) return failure("no path");
    const query = text(get.query(object));
    const path = pathOfTarget(target);
    const status = Number(get.status(object));
    return makeRecord(
      time,
      text(get.ip(object)),
      text(get.method(object)) ?? "GET",
      query === undefined ? path : `${path}?${query}`,
      text(get.userAgent(object)),
      Number.isNaN(status) ? undefined : status,
      text(get.user(object)),
      text(get.plan(object)),
      lineNumber,
    );
  }
}

export const jsonLines: LogFormat = {
  name: "json",
  summary: `JSON lines with a field map (--field ip=client.ip --field time=ts ...; defaults ${Object.entries(
    JSON_FIELDS,
  )
    .filter(([, name]) => name !== "")
    .map(([field, name]) => `${field}=${name}`)
    .join(" ")})`,
  detect: (lines) => lines.some((line) => line.charCodeAt(0) === 123),
  create: (options) => {
    const map: Record<JsonField, string> = { ...JSON_FIELDS };
    for (const [field, name] of Object.entries(options.fields)) {
      if (!(field in JSON_FIELDS)) {
        throw new ReplayError(
          "EL_REPLAY_ARGUMENT",
          `--field ${field}=${name}: unknown field; the fields are ${Object.keys(JSON_FIELDS).join(", ")}`,
        );
      }
      map[field as JsonField] = name;
    }
    return new JsonLinesParser(map, options);
  },
};
