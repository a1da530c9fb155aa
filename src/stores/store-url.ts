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

/** How an HTTP endpoint option is named in its errors (see `httpEndpoint`). */
export interface EndpointWords {
  /** The option, as its errors name it: `redisRestStore: url`. */
  readonly option: string;
  /** What a right value looks like: `the REST endpoint, such as https://…`. */
  readonly example: string;
  /** Where plain `http://` is meant for: `a proxy on your own network`. */
  readonly plainHttp: string;
  /** Where credentials go instead of the URL: `pass the token as the token option`. */
  readonly credentials: string;
  /** Said after a wrong scheme (`For redis:// use edgelimit/redis.`), if anything. */
  readonly otherScheme?: string;
}

/**
 * An HTTP endpoint option, checked: `https://` (or `http://`), a host, and no credentials in
 * it, since the store takes those as an option of their own and a URL is printed in logs.
 */
export function httpEndpoint(url: string, words: EndpointWords): URL {
  const parsed = parseStoreUrl(url, `${words.option} must be ${words.example}`);
  if (parsed.protocol !== "https:" && parsed.protocol !== "http:") {
    const after = words.otherScheme === undefined ? "" : `. ${words.otherScheme}`;
    throw new EdgelimitError(
      "EL_STORE_URL",
      `${words.option} must start with https:// (or http:// for ${words.plainHttp}); got "${parsed.protocol}//…"${after}`,
    );
  }
  if (parsed.username !== "" || parsed.password !== "") {
    throw new EdgelimitError(
      "EL_STORE_URL",
      `${words.option} must not carry credentials; ${words.credentials}`,
    );
  }
  return parsed;
}
