/** Small text helpers shared by the log formats. */

/** `-` is how every one of these formats writes "no value". */
export function orUndefined(value: string | undefined): string | undefined {
  return value === undefined || value === "" || value === "-" ? undefined : value;
}

/**
 * Undoes one layer of percent-encoding, leaving a malformed escape as it is (a log line must
 * never fail on what a client wrote). `+` stays `+`: these logs encode a space as `%20`.
 */
export function decodePercent(text: string): string {
  if (text.indexOf("%") === -1) return text;
  try {
    return decodeURIComponent(text);
  } catch {
    return text.replace(/%([0-9A-Fa-f]{2})/g, (_match, hex: string) =>
      String.fromCharCode(Number.parseInt(hex, 16)),
    );
  }
}

const MONTHS: Record<string, number> = {
  Jan: 0,
  Feb: 1,
  Mar: 2,
  Apr: 3,
  May: 4,
  Jun: 5,
  Jul: 6,
  Aug: 7,
  Sep: 8,
  Oct: 9,
  Nov: 10,
  Dec: 11,
};

function digits(text: string, start: number, count: number): number {
  let value = 0;
  for (let i = start; i < start + count; i++) {
    const code = text.charCodeAt(i) - 48;
    if (code < 0 || code > 9) return Number.NaN;
    value = value * 10 + code;
  }
  return value;
}

/** `10/Oct/2000:13:55:36 -0700` (nginx `$time_local`, Apache `%t`) to epoch ms, NaN if not. */
export function parseClfTime(text: string): number {
  if (text.length < 26 || text.charCodeAt(2) !== 47 || text.charCodeAt(6) !== 47) {
    return Number.NaN;
  }
  const month = MONTHS[text.slice(3, 6)];
  if (month === undefined) return Number.NaN;
  const utc = Date.UTC(
    digits(text, 7, 4),
    month,
    digits(text, 0, 2),
    digits(text, 12, 2),
    digits(text, 15, 2),
    digits(text, 18, 2),
  );
  const sign = text[21] === "-" ? -1 : text[21] === "+" ? 1 : Number.NaN;
  const offsetMinutes = digits(text, 22, 2) * 60 + digits(text, 24, 2);
  return utc - sign * offsetMinutes * 60_000;
}

/** `2024-05-01` and `13:55:36` (CloudFront: UTC) to epoch ms, NaN if not. */
export function parseDateAndTime(date: string, time: string): number {
  if (date.length !== 10 || time.length < 8) return Number.NaN;
  const day = Date.UTC(digits(date, 0, 4), digits(date, 5, 2) - 1, digits(date, 8, 2));
  return day + (digits(time, 0, 2) * 3600 + digits(time, 3, 2) * 60 + digits(time, 6, 2)) * 1000;
}

/** `13:55:36` (optionally with a fraction, ignored) to milliseconds into the day, NaN if not. */
export function parseClock(time: string): number {
  if (time.length < 8 || time.charCodeAt(2) !== 58 || time.charCodeAt(5) !== 58) return Number.NaN;
  return (digits(time, 0, 2) * 3600 + digits(time, 3, 2) * 60 + digits(time, 6, 2)) * 1000;
}

/** An ISO 8601 / RFC 3339 timestamp with a zone (`2024-05-01T13:55:36.186641Z`), NaN if not. */
export function parseIsoTime(text: string): number {
  if (text.length < 20 || text.charCodeAt(10) !== 84) return Number.NaN;
  return Date.parse(text);
}

/** The latest time a JavaScript date can hold, epoch ms (year 275760). */
const LAST_DATE_MS = 8.64e15;

/**
 * A timestamp written as a number: seconds, milliseconds, microseconds or nanoseconds since the
 * epoch, told apart by size (any date between 2001 and 2286 is unambiguous). NaN beyond what a
 * date can hold (`1e300`), so that such a line is malformed rather than a date no report can
 * print.
 */
export function epochToMs(value: number): number {
  if (!Number.isFinite(value) || value <= 0) return Number.NaN;
  const ms =
    value < 1e11 ? value * 1000 : value < 1e14 ? value : value < 1e17 ? value / 1000 : value / 1e6;
  return ms > LAST_DATE_MS ? Number.NaN : ms;
}

/** A time field of a JSON log: a number (see `epochToMs`), a numeric string or an ISO string. */
export function parseJsonTime(value: unknown): number {
  if (typeof value === "number") return epochToMs(value);
  if (typeof value !== "string" || value === "") return Number.NaN;
  const code = value.charCodeAt(0);
  if (code >= 48 && code <= 57 && /^\d+(\.\d+)?$/.test(value)) return epochToMs(Number(value));
  return Date.parse(value);
}

/** Splits `host:port`, `[v6]:port` and ALB's bare `v6:port` into the address. */
export function addressOfHostPort(text: string): string | undefined {
  if (text === "-" || text === "") return undefined;
  if (text.charCodeAt(0) === 91) {
    const close = text.indexOf("]");
    return close === -1 ? undefined : text.slice(1, close);
  }
  const colon = text.lastIndexOf(":");
  return colon === -1 ? text : text.slice(0, colon);
}

/** The path (with query) of a request target, which may be absolute (`http://h:80/p?q`). */
export function pathOfTarget(target: string): string {
  if (target.charCodeAt(0) === 47) return target;
  const scheme = target.indexOf("://");
  if (scheme === -1) return target;
  const slash = target.indexOf("/", scheme + 3);
  return slash === -1 ? "/" : target.slice(slash);
}
