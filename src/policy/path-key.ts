/**
 * What a path in a policy (a rule's path, a namespace's `match.path`, a `failClosed` prefix, the
 * challenge page) may hold. Requests are matched in canonical form (core/path.ts), and the
 * policy's paths are put in the same form when it loads, so `/préférences` matches however a
 * client escapes it. What no request's path can hold is refused here: the rule would load and
 * silently never match.
 */
import { escapeUtf8 } from "../core/path.js";

/** Why `value` can never be matched as a path, or undefined when it can. */
export function pathKeyProblem(value: string): string | undefined {
  if (!value.startsWith("/")) return 'must be a path starting with "/"';
  for (let i = 0; i < value.length; i++) {
    const code = value.charCodeAt(i);
    if (code <= 0x1f || (code >= 0x7f && code <= 0x9f)) {
      const shown = showControl(value[i] as string);
      const escaped = escapeUtf8(value[i] as string);
      return `has a control character (${shown}, at position ${i + 1}): a request's path never carries one as it is, so this rule could never match; remove it, or write it escaped (${escaped}) if the origin's path really holds one`;
    }
    if (code >= 0xd800 && code <= 0xdfff) {
      const paired =
        code <= 0xdbff
          ? (value.charCodeAt(i + 1) & 0xfc00) === 0xdc00
          : (value.charCodeAt(i - 1) & 0xfc00) === 0xd800;
      if (!paired) {
        return `is not valid Unicode (a lone surrogate at position ${i + 1}): no request's path can hold it, so this rule could never match`;
      }
    }
  }
  if (value.includes("?")) {
    return 'holds a query string ("?..."): rules match the path alone and the query is ignored, so this one could never match; write the path without it';
  }
  if (value.includes("#")) {
    return 'holds a fragment ("#..."), which browsers never send, so this rule could never match; write the path without it';
  }
  return undefined;
}

/** A control character as an escaped a reader can see: `\n`, `\r`, `\u0085`. */
export function showControl(character: string): string {
  const json = JSON.stringify(character).slice(1, -1);
  if (json !== character) return json;
  return `\\u${character.charCodeAt(0).toString(16).padStart(4, "0")}`;
}
