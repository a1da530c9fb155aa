/**
 * Redis over HTTP, in the protocol of Upstash's REST API (which Vercel KV and self-hosted
 * proxies such as serverless-redis-http speak too): a command is a JSON array POSTed to the
 * endpoint, a pipeline an array of them POSTed to `/pipeline`, each answered `{"result": …}` or
 * `{"error": "…"}`; the token goes in `Authorization: Bearer`. Only `fetch`: it runs wherever a
 * Web-standard runtime does (docs/redis.md says why this and not @upstash/redis).
 */
import { EdgelimitError } from "../../core/errors.js";
import { checkOptions, type OptionsShape, required } from "../../core/options.js";
import { redact } from "../redact.js";
import { httpEndpoint } from "../store-url.js";

export type RedisArgument = string | number;

/** A command's reply, or the error Redis answered it with (`NOSCRIPT …`, `ERR …`). */
export type PipelineReply = { readonly result: unknown } | { readonly error: string };

export interface RedisRestClientOptions {
  /** The endpoint, as the provider gives it: `https://eu1-example-12345.upstash.io`. */
  readonly url: string;
  /** The REST token (Upstash: `UPSTASH_REDIS_REST_TOKEN`; Vercel KV: `KV_REST_API_TOKEN`). */
  readonly token: string;
}

/** The run-time check's view of `RedisRestClientOptions` (see core/options.ts). */
export function restConnectionShape() {
  return {
    url: required({
      describe:
        "the REST endpoint, a string (Upstash: UPSTASH_REDIS_REST_URL; Vercel KV: KV_REST_API_URL)",
      test: (value) => typeof value === "string",
    }),
    token: required({
      describe:
        "the database's REST token, a string (Upstash: UPSTASH_REDIS_REST_TOKEN; Vercel KV: KV_REST_API_TOKEN)",
      test: (value) => typeof value === "string",
    }),
  } satisfies OptionsShape<RedisRestClientOptions>;
}

/** An error Redis itself answered (as opposed to a failed request): the command was refused. */
export class RedisReplyError extends Error {
  override readonly name = "RedisReplyError";
}

export class RedisRestClient {
  readonly url: string;
  readonly #pipelineUrl: string;
  readonly #headers: Record<string, string>;
  /** Hidden wherever an answer is quoted: an endpoint may echo the request's fields in an error. */
  readonly #secrets: readonly string[];

  constructor(options: RedisRestClientOptions) {
    if (typeof EDGELIMIT_BUNDLE === "undefined")
      checkOptions("RedisRestClient", options, restConnectionShape(), { code: "EL_STORE_OPTION" });
    this.url = httpEndpoint(options.url, {
      option: "redisRestStore: url",
      example: "the REST endpoint, such as https://eu1-example-12345.upstash.io",
      plainHttp: "a proxy on your own network",
      credentials: "pass the token as the token option",
      otherScheme: "For redis:// use edgelimit/redis.",
    }).href.replace(/\/+$/, "");
    this.#pipelineUrl = `${this.url.replace(/\/+$/, "")}/pipeline`;
    if (typeof options.token !== "string" || options.token === "") {
      throw new EdgelimitError(
        "EL_STORE_OPTION",
        "redisRestStore: token is required: the REST token of the Redis database (Upstash: UPSTASH_REDIS_REST_TOKEN; Vercel KV: KV_REST_API_TOKEN)",
      );
    }
    this.#headers = {
      authorization: `Bearer ${options.token}`,
      "content-type": "application/json",
    };
    this.#secrets = [options.token];
  }

  /** One command; rejects with `RedisReplyError` when Redis answered with an error. */
  async command(args: readonly RedisArgument[], signal?: AbortSignal): Promise<unknown> {
    const body = await this.#post(this.url, args, signal);
    if (typeof body === "object" && body !== null && "result" in body) return body.result;
    throw new EdgelimitError(
      "EL_STORE_FAILED",
      `redis REST endpoint answered ${this.#quote(body)}, not {"result": ...}`,
    );
  }

  /** Several commands in one request, run in order (not atomically); one reply each. */
  async pipeline(
    commands: readonly (readonly RedisArgument[])[],
    signal?: AbortSignal,
  ): Promise<PipelineReply[]> {
    const body = await this.#post(this.#pipelineUrl, commands, signal);
    if (!Array.isArray(body) || body.length !== commands.length) {
      throw new EdgelimitError(
        "EL_STORE_FAILED",
        `redis REST pipeline answered ${this.#quote(body)} for ${commands.length} commands`,
      );
    }
    return (body as PipelineReply[]).map((reply) =>
      isErrorReply(reply) ? { error: redact(reply.error, this.#secrets) } : reply,
    );
  }

  async #post(url: string, payload: unknown, signal: AbortSignal | undefined): Promise<unknown> {
    const response = await fetch(url, {
      method: "POST",
      headers: this.#headers,
      body: JSON.stringify(payload),
      ...(signal === undefined ? {} : { signal }),
    });
    const text = await response.text();
    let body: unknown;
    try {
      body = JSON.parse(text);
    } catch {
      body = undefined;
    }
    if (response.status === 401 || response.status === 403) {
      throw new EdgelimitError(
        "EL_STORE_FAILED",
        `redis REST endpoint ${this.url} refused the token (HTTP ${response.status}): check the token the store was given`,
      );
    }
    // A command Redis refused is answered with a 4xx and `{"error"}`: that is Redis's answer.
    if (isErrorReply(body)) throw new RedisReplyError(redact(body.error, this.#secrets));
    if (!response.ok || body === undefined) {
      throw new EdgelimitError(
        "EL_STORE_FAILED",
        `redis REST endpoint ${this.url} answered HTTP ${response.status}: ${redact(text, this.#secrets).slice(0, 200)}`,
      );
    }
    return body;
  }

  /** An answer quoted in a message: secrets hidden first, so that a cut never shows part of one. */
  #quote(body: unknown): string {
    return redact(JSON.stringify(body) ?? "undefined", this.#secrets).slice(0, 200);
  }
}

function isErrorReply(body: unknown): body is { error: string } {
  return (
    typeof body === "object" &&
    body !== null &&
    "error" in body &&
    typeof (body as { error: unknown }).error === "string"
  );
}
