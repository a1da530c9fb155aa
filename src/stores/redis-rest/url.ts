import { EdgelimitError } from "../../core/errors.js";
import { checkArgument } from "../../core/options.js";
import { redact } from "../redact.js";
import type { RedisRestStoreOptions } from "./store.js";

/** The variable `redis+https://` URLs without a token read it from. */
export const REDIS_REST_TOKEN_VARIABLE = "EDGELIMIT_REDIS_REST_TOKEN";

/**
 * `redis+https://[:TOKEN@]HOST[:PORT][/PATH]` names the REST endpoint `https://HOST[:PORT][/PATH]`
 * (`redis+http://` for a proxy on your own network), as `serve --store` takes it. The token is
 * the URL's password or, to keep it out of command lines and process lists, the variable
 * `EDGELIMIT_REDIS_REST_TOKEN` in `env`.
 */
export function redisRestOptionsFromUrl(
  url: string,
  env: Readonly<Record<string, string | undefined>> = {},
): RedisRestStoreOptions {
  checkUrlArguments("redisRestOptionsFromUrl", url, env);
  const match = /^redis\+(https?):\/\/(.*)$/i.exec(url.trim());
  if (match === null) {
    throw new EdgelimitError(
      "EL_STORE_URL",
      `a Redis REST URL looks like redis+https://:TOKEN@HOST[/PATH] (or redis+https://HOST with ${REDIS_REST_TOKEN_VARIABLE} set); got "${redact(url)}"`,
    );
  }
  const endpoint = new URL(`${(match[1] as string).toLowerCase()}://${match[2] as string}`);
  const fromUrl = decodeURIComponent(endpoint.password || endpoint.username);
  endpoint.username = "";
  endpoint.password = "";
  const token = fromUrl === "" ? env[REDIS_REST_TOKEN_VARIABLE] : fromUrl;
  if (token === undefined || token === "") {
    throw new EdgelimitError(
      "EL_STORE_URL",
      `${redact(url)} has no token: write redis+https://:TOKEN@${endpoint.host}${endpoint.pathname === "/" ? "" : endpoint.pathname}, or set ${REDIS_REST_TOKEN_VARIABLE}`,
    );
  }
  return { url: endpoint.href.replace(/\/+$/, ""), token };
}

/** `url` and `env` as plain JavaScript may pass them; `name` is the function called. */
export function checkUrlArguments(name: string, url: unknown, env: unknown): void {
  if (typeof EDGELIMIT_BUNDLE === "undefined") {
    checkArgument(name, "the URL", url, "string", "EL_STORE_URL");
    checkArgument(name, "env (second argument)", env, "object", "EL_STORE_OPTION");
  }
}
