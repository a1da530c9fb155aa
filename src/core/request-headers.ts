import type { RequestDescription } from "./types.js";

/** Reads one header from either a plain record or a `Headers` object, case-insensitively. */
export function readHeader(
  headers: RequestDescription["headers"],
  name: string,
  lowerCaseNames?: boolean,
): string | undefined {
  if (headers === undefined) return undefined;
  if (typeof (headers as Headers).get === "function") {
    return (headers as Headers).get(name) ?? undefined;
  }
  const record = headers as Record<string, string | string[] | undefined>;
  let value = record[name];
  if (value === undefined) {
    // Names known to be lower case: only a name asked for with capitals can still be there.
    if (lowerCaseNames === true && !hasUpperCase(name)) return undefined;
    const lower = name.toLowerCase();
    value = record[lower];
    if (value === undefined && (lower !== name || lowerCaseNames === true)) return undefined;
    if (value === undefined) {
      // A plain object may spell the name in any case; most keys differ in length already,
      // which spares a lower-cased copy of every header name for every absent header.
      for (const key in record) {
        if (key.length === lower.length && key.toLowerCase() === lower) {
          value = record[key];
          break;
        }
      }
    }
  }
  if (value === undefined) return undefined;
  return Array.isArray(value) ? value.join(", ") : value;
}

function hasUpperCase(name: string): boolean {
  for (let i = 0; i < name.length; i++) {
    const code = name.charCodeAt(i);
    if (code >= 65 && code <= 90) return true;
  }
  return false;
}
