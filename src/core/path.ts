const UNRESERVED = /%(2[DdEe]|3\d|4[1-9A-Fa-f]|5[0-9Aa]|5[Ff]|6[1-9A-Fa-f]|7[0-9Aa]|7[Ee])/g;

/**
 * The path rules are matched against. Clients can write one route many ways; each of these
 * resolves to the same path so that none of them escapes a per-path limit:
 * `/api//reports`, `/api/./reports`, `/api/x/../reports`, `/api/%72eports`, `\api\reports`.
 * The query string and fragment are dropped. Case is kept (origins route case-sensitively).
 */
export function normalizePath(raw: string): string {
  if (raw.length === 0) return "/";
  // One scan: where the query or fragment starts, and whether anything before it needs
  // rewriting (`%`, `\`, `//`, `/.`); most paths need none.
  let end = raw.length;
  let needsWork = raw.charCodeAt(0) !== 47;
  for (let i = 0; i < raw.length; i++) {
    const code = raw.charCodeAt(i);
    if (code === 63 || code === 35) {
      end = i;
      break;
    }
    if (code === 37 || code === 92) needsWork = true;
    else if (code === 47) {
      const next = raw.charCodeAt(i + 1);
      if (next === 47 || next === 46) needsWork = true;
    }
  }
  let path = end === raw.length ? raw : raw.slice(0, end);
  if (!needsWork) return path;
  path = path.replace(/\\/g, "/");
  // Decode only unreserved characters: an encoded "/" (%2F) stays a different path.
  path = path.replace(UNRESERVED, (encoded) =>
    String.fromCharCode(Number.parseInt(encoded.slice(1), 16)),
  );
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
