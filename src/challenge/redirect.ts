const MAX_REDIRECT_LENGTH = 2048;
const PLACEHOLDER_ORIGIN = "http://edgelimit.invalid";
// Browsers drop tabs and newlines inside URLs, so "/\t/evil.example" would become "//evil...".
// biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what we refuse
const CONTROL = /[\u0000-\u001f\u007f]/;

/**
 * The only redirect targets accepted after a challenge: a path on this origin. Anything that a
 * browser could read as another origin (`//host`, `/\host`, `https://host`, the same written
 * with percent-escapes or control characters) falls back to `/`.
 */
export function safeRedirect(raw: string | null | undefined): string {
  if (raw === null || raw === undefined || raw === "" || raw.length > MAX_REDIRECT_LENGTH) {
    return "/";
  }
  if (CONTROL.test(raw)) return "/";
  let decoded = raw;
  // Decoding layer by layer catches "%2F%2Fevil.example" and its double-encoded forms; a
  // value that still decodes after a few layers is not a path a real page produced.
  for (let layer = 0; ; layer++) {
    if (!isLocalPath(decoded)) return "/";
    let next: string;
    try {
      next = decodeURIComponent(decoded);
    } catch {
      return "/";
    }
    if (next === decoded) break;
    if (layer === 3) return "/";
    decoded = next;
  }
  let url: URL;
  try {
    url = new URL(raw, PLACEHOLDER_ORIGIN);
  } catch {
    return "/";
  }
  if (url.origin !== PLACEHOLDER_ORIGIN) return "/";
  const target = url.pathname + url.search;
  // Dot segments can collapse into a scheme-relative path ("/.//evil.example").
  return target.startsWith("//") ? "/" : target;
}

/** The path part (before `?` or `#`) is rooted, not scheme-relative, with no `\` or controls. */
function isLocalPath(text: string): boolean {
  const end = text.search(/[?#]/);
  const path = end === -1 ? text : text.slice(0, end);
  return (
    path.startsWith("/") && !path.startsWith("//") && !path.includes("\\") && !CONTROL.test(path)
  );
}
