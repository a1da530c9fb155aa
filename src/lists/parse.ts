import { EdgelimitError } from "../core/errors.js";
import { CidrSet, parseCidr } from "../core/ip.js";

/**
 * Turns a source's body into a CIDR set. Accepted shapes: a JSON array of strings, a JSON
 * object with a `cidrs` array, or plain text with one address or range per line (`#` starts a
 * comment). One malformed entry rejects the whole body, so that a half-written file or a
 * truncated download never replaces a good list with a shorter one.
 */
export function parseListBody(body: string, origin: string): CidrSet {
  const trimmed = body.trim();
  let entries: unknown;
  if (trimmed.startsWith("[") || trimmed.startsWith("{")) {
    try {
      entries = JSON.parse(trimmed);
    } catch (error) {
      throw new EdgelimitError(
        "EL_LIST_SOURCE",
        `${origin}: not valid JSON (${(error as Error).message})`,
      );
    }
  } else {
    entries = trimmed
      .split(/\r?\n/)
      .map((line) => line.replace(/#.*/, "").trim())
      .filter((line) => line !== "");
  }
  return cidrSetOf(entries, origin);
}

export function cidrSetOf(entries: unknown, origin: string): CidrSet {
  const list =
    entries !== null && typeof entries === "object" && !Array.isArray(entries)
      ? (entries as { cidrs?: unknown }).cidrs
      : entries;
  if (!Array.isArray(list)) {
    throw new EdgelimitError(
      "EL_LIST_SOURCE",
      `${origin}: expected a JSON array of addresses, an object with a "cidrs" array, or one address per line`,
    );
  }
  for (const [index, entry] of list.entries()) {
    if (typeof entry !== "string") {
      throw new EdgelimitError("EL_LIST_SOURCE", `${origin}: entry ${index} is not a string`);
    }
    try {
      parseCidr(entry);
    } catch {
      throw new EdgelimitError(
        "EL_LIST_SOURCE",
        `${origin}: entry ${index} ${JSON.stringify(entry)} is not an address or range such as 203.0.113.0/24`,
      );
    }
  }
  return new CidrSet(list as string[]);
}
