/**
 * The path rules are matched against. Clients can write one route many ways, and a per-path
 * limit is only a limit if every spelling that reaches the route counts against it. Two steps:
 *
 * - `normalizePath` gives one canonical form that every origin agrees is the same path: the
 *   query and fragment dropped, `\` as `/`, empty and dot segments resolved, escapes of
 *   unreserved characters decoded (`%61pi` is `api`), every other escape in upper case
 *   (`%c3%a9` is `%C3%A9`), and what a URL parser escapes (non-ASCII, spaces, controls, `"<>`{}`)
 *   escaped as UTF-8, so `/préférences` as written in a policy and `/pr%C3%A9f%C3%A9rences` as a
 *   client sends it are one path. The canonical form is printable ASCII.
 * - `spellingsOf` gives the forms of that path origins differ on, each of which is matched: the
 *   path without matrix parameters (`/api/export;jsessionid=1` is `/api/export` to a servlet
 *   container, `/..;/` its parent) and, unless the origin is known to route letter case
 *   exactly, the path in lower case. A request counts against the rules any of them match, so
 *   where origins disagree the request is counted more, never less.
 */

/** One form of a request's path to match; a `folded` one is compared with lower-cased prefixes. */
export interface Spelling {
  readonly path: string;
  readonly folded: boolean;
}

/** Matrix parameters: from `;` to the end of the segment. */
const MATRIX_PARAMETERS = /;[^/]*/g;

/**
 * The spellings of a canonical path (`normalizePath`'s) to match rules with: the path itself
 * and, where it has matrix parameters, the path without them; each as written where the origin
 * routes letter case exactly (`caseSensitive` true), in lower case where it does not (false),
 * and both where that is not known (undefined: counting both is right for either kind of
 * origin, and never moves a request to a more lenient rule than either would).
 */
export function spellingsOf(path: string, caseSensitive: boolean | undefined): Spelling[] {
  const spellings: Spelling[] = [];
  const add = (form: string) => {
    if (caseSensitive !== false) spellings.push({ path: form, folded: false });
    if (caseSensitive !== true) spellings.push({ path: form.toLowerCase(), folded: true });
  };
  add(path);
  if (path.includes(";")) {
    const stripped = normalizePath(path.replace(MATRIX_PARAMETERS, ""));
    if (stripped !== path) add(stripped);
  }
  return spellings;
}

/** A character as UTF-8 escapes; a lone surrogate as U+FFFD's, as URL parsers write it. */
export function escapeUtf8(character: string): string {
  try {
    return encodeURIComponent(character);
  } catch {
    return "%EF%BF%BD";
  }
}

/**
 * What a canonical path never holds: a start other than `/`, a `%` (it is always an escape to
 * put in upper case or decode), `\`, what URL parsers escape (controls, space, non-ASCII,
 * `"<>`{}`), an empty or dot segment. Most paths hold none of it and are returned as they are.
 */
const NEEDS_WORK = /^(?!\/)|[%\\"<>`{}]|[^\x21-\x7e]|\/[/.]/;

/** An escape, a `%` that starts none, or a character to escape (a surrogate pair is one). */
const TO_CANONICAL = /%([0-9A-Fa-f]{2})?|[^\x21-\x7e]|["<>`{}]/gu;

/**
 * One match of `TO_CANONICAL` in canonical form: an escape of an unreserved character (RFC
 * 3986: letters, digits, `-._~`) decoded, other escapes in upper case, a stray `%` escaped
 * itself (so decoding cannot form a new escape: the form is stable), a character escaped.
 */
function canonicalPart(part: string, hex: string | undefined): string {
  if (part[0] !== "%") return escapeUtf8(part);
  if (hex === undefined) return "%25";
  const character = String.fromCharCode(Number.parseInt(hex, 16));
  return /[\w.~-]/.test(character) ? character : `%${hex.toUpperCase()}`;
}

/**
 * The canonical form of a request's path (see the top of this file): `/api//reports`,
 * `/api/./reports`, `/api/x/../reports`, `/api/%72eports` and `\api\reports` are all
 * `/api/reports`. Case is kept (whether it matters is the origin's to say: `spellingsOf`).
 */
export function normalizePath(raw: string): string {
  const end = raw.search(/[?#]/);
  let path = end < 0 ? raw : raw.slice(0, end);
  if (!NEEDS_WORK.test(path)) return path;
  // Escapes before segments: an escaped "/" (%2F) stays a different path, an escaped "."
  // (%2E) is a dot as URL parsers read it.
  path = path.replace(/\\/g, "/").replace(TO_CANONICAL, canonicalPart);
  const segments: string[] = [];
  const parts = path.split("/");
  for (let i = 0; i < parts.length; i++) {
    const segment = parts[i] as string;
    if (segment === "" || segment === ".") {
      if (i === parts.length - 1) segments.push("");
      continue;
    }
    if (segment === "..") {
      segments.pop();
      if (i === parts.length - 1) segments.push("");
      continue;
    }
    segments.push(segment);
  }
  return `/${segments.join("/")}`;
}

/**
 * Prefix match on whole segments: `/api/reports` matches `/api/reports` and
 * `/api/reports/2026` but not `/api/reportsX`; a prefix ending in `/` (`/api/admin/`) matches
 * everything under it and the bare `/api/admin`.
 */
export function matchesPrefix(path: string, prefix: string): boolean {
  if (prefix === "/") return true;
  if (prefix.charCodeAt(prefix.length - 1) === 47) {
    return path.startsWith(prefix) || path === prefix.slice(0, -1);
  }
  if (!path.startsWith(prefix)) return false;
  return path.length === prefix.length || path.charCodeAt(prefix.length) === 47;
}
