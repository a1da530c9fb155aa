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

/** How the origin routes letter case: known either way, or not known (`paths.caseSensitive`). */
export type CaseRouting = "sensitive" | "insensitive" | "unknown";

/** The policy's word on letter case comes first, then the framework's, as its adapter knows it. */
export function caseRoutingOf(
  policySays: boolean | undefined,
  frameworkSays: boolean | undefined,
): CaseRouting {
  const sensitive = policySays ?? frameworkSays;
  if (sensitive === undefined) return "unknown";
  return sensitive ? "sensitive" : "insensitive";
}

/** One form of a request's path to match; a `folded` one is compared with lower-cased prefixes. */
export interface Spelling {
  readonly path: string;
  readonly folded: boolean;
}

/** Matrix parameters: from `;` to the end of the segment. */
const MATRIX_PARAMETERS = /;[^/]*/g;

/**
 * The spellings of a canonical path (`normalizePath`'s) to match rules with: the path itself
 * and, where it has matrix parameters, the path without them; each as written, in lower case,
 * or both (where the origin's routing of letter case is unknown: counting both is right for a
 * case-sensitive origin and a case-insensitive one, and never moves a request to a more lenient
 * rule than either would).
 */
export function spellingsOf(path: string, routing: CaseRouting): Spelling[] {
  const spellings: Spelling[] = [];
  const add = (form: string) => {
    if (routing !== "insensitive") spellings.push({ path: form, folded: false });
    if (routing !== "sensitive") spellings.push({ path: form.toLowerCase(), folded: true });
  };
  add(path);
  if (path.includes(";")) {
    const stripped = normalizePath(path.replace(MATRIX_PARAMETERS, ""));
    if (stripped !== path) add(stripped);
  }
  return spellings;
}

/** Everything a canonical path leaves as it is needs none of the work below. */
function needsEscaping(code: number): boolean {
  // Controls, space, non-ASCII and the printable characters URL parsers escape in a path.
  return (
    code <= 0x20 ||
    code >= 0x7f ||
    code === 0x22 ||
    code === 0x3c ||
    code === 0x3e ||
    code === 0x60 ||
    code === 0x7b ||
    code === 0x7d
  );
}

/** RFC 3986's unreserved characters: an escape of one means the character to every origin. */
function isUnreserved(code: number): boolean {
  return (
    (code >= 0x41 && code <= 0x5a) ||
    (code >= 0x61 && code <= 0x7a) ||
    (code >= 0x30 && code <= 0x39) ||
    code === 0x2d ||
    code === 0x2e ||
    code === 0x5f ||
    code === 0x7e
  );
}

function isHexDigit(code: number): boolean {
  return (
    (code >= 0x30 && code <= 0x39) ||
    (code >= 0x41 && code <= 0x46) ||
    (code >= 0x61 && code <= 0x66)
  );
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
 * Escapes in canonical form: unreserved ones decoded, the rest in upper case, a `%` that starts
 * no escape escaped itself (so that decoding cannot form a new escape: the form is stable), and
 * what needs escaping escaped.
 */
function canonicalEscapes(path: string): string {
  let out = "";
  for (let i = 0; i < path.length; i++) {
    const code = path.charCodeAt(i);
    if (code === 0x25) {
      if (isHexDigit(path.charCodeAt(i + 1)) && isHexDigit(path.charCodeAt(i + 2))) {
        const hex = path.slice(i + 1, i + 3);
        const byte = Number.parseInt(hex, 16);
        out += isUnreserved(byte) ? String.fromCharCode(byte) : `%${hex.toUpperCase()}`;
        i += 2;
      } else {
        out += "%25";
      }
    } else if (needsEscaping(code)) {
      // A surrogate pair is one character.
      const pair = code >= 0xd800 && code <= 0xdbff && (path.charCodeAt(i + 1) & 0xfc00) === 0xdc00;
      out += escapeUtf8(path.slice(i, pair ? i + 2 : i + 1));
      if (pair) i++;
    } else {
      out += path[i];
    }
  }
  return out;
}

/**
 * The canonical form of a request's path (see the top of this file): `/api//reports`,
 * `/api/./reports`, `/api/x/../reports`, `/api/%72eports` and `\api\reports` are all
 * `/api/reports`. Case is kept (whether it matters is the origin's to say: `spellingsOf`).
 */
export function normalizePath(raw: string): string {
  if (raw.length === 0) return "/";
  // One scan: where the query or fragment starts, and whether anything before it needs
  // rewriting (`%`, `\`, `//`, `/.`, a character to escape); most paths need none.
  let end = raw.length;
  let needsWork = raw.charCodeAt(0) !== 47;
  for (let i = 0; i < raw.length; i++) {
    const code = raw.charCodeAt(i);
    if (code === 63 || code === 35) {
      end = i;
      break;
    }
    if (code === 37 || code === 92 || needsEscaping(code)) needsWork = true;
    else if (code === 47) {
      const next = raw.charCodeAt(i + 1);
      if (next === 47 || next === 46) needsWork = true;
    }
  }
  let path = end === raw.length ? raw : raw.slice(0, end);
  if (!needsWork) return path;
  // Escapes before segments: an escaped "/" (%2F) stays a different path, an escaped "."
  // (%2E) is a dot as URL parsers read it.
  path = canonicalEscapes(path.replace(/\\/g, "/"));
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
