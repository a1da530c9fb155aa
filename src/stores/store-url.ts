import { EdgelimitError } from "../core/errors.js";
import { redact } from "./redact.js";

/**
 * `url` parsed, or an `EL_STORE_URL` error that says what to write instead (`expected`, such
 * as "redis URL must look like redis://host:port"). Every store that takes a URL parses it so.
 */
export function parseStoreUrl(url: string, expected: string): URL {
  try {
    return new URL(url);
  } catch {
    throw new EdgelimitError("EL_STORE_URL", `${expected}; got "${redact(url)}"`);
  }
}
