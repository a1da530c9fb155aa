import { type AwsCredentials, dynamoDbRequest } from "../../aws/sigv4-request.js";
import { deriveWebSigningKey, signAwsRequestWeb } from "../../aws/sigv4-web.js";
import { EdgelimitError } from "../../core/errors.js";
import { checkOptions, type OptionsShape, positiveMs, required } from "../../core/options.js";
import type { StoreCallProgress, StoreStatus } from "../../core/types.js";
import { breakerOption, type CircuitBreakerOptions, monotonicNow } from "../remote/breaker.js";
import { answeredInTime } from "../remote/call-timeout.js";
import { RemoteGuard } from "../remote/guard.js";
import { statusOf } from "../remote/health.js";
import { httpEndpoint } from "../store-url.js";
import { credentials, REGION } from "./options.js";
import {
  type CallOptions,
  credentialsFromEnv,
  type DynamoDbClient,
  endpointFor,
  guardedCall,
  type RawAnswer,
  secretFields,
} from "./protocol.js";

/**
 * Credentials read for each call: static ones, or a provider of temporary ones (an STS role, a
 * platform's OIDC federation), which caches them as it sees fit.
 */
export type AwsCredentialsProvider = () => AwsCredentials | Promise<AwsCredentials>;

export interface DynamoDbFetchClientOptions {
  readonly region: string;
  /** `http://127.0.0.1:8000` for a local server; default `https://dynamodb.<region>.amazonaws.com`. */
  readonly endpoint?: string | undefined;
  /**
   * Default: `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY` and `AWS_SESSION_TOKEN` from
   * `process.env`, where the runtime has one (Next.js middleware, Vercel); elsewhere (workerd)
   * pass them.
   */
  readonly credentials?: AwsCredentials | AwsCredentialsProvider | undefined;
  /**
   * A call without a complete answer this long after it was sent is aborted and has failed
   * (default 3000 ms). The connection's setup is part of it: `fetch` does not tell it apart.
   */
  readonly requestTimeoutMs?: number | undefined;
  /**
   * How long a fresh client's calls count as connection setup, from its first call (default
   * 1000 ms; see `DynamoDbFetchClient`).
   */
  readonly connectTimeoutMs?: number | undefined;
  /** The endpoint's circuit breaker (default: 5 consecutive failures open it for 250 ms), or `false`. */
  readonly breaker?: CircuitBreakerOptions | false | undefined;
}

export function dynamodbFetchClientShape() {
  return {
    region: required(REGION),
    endpoint: "string",
    credentials: [credentials(), "function"],
    requestTimeoutMs: "number",
    connectTimeoutMs: "number",
    breaker: breakerOption(),
  } satisfies OptionsShape<DynamoDbFetchClientOptions>;
}

/** An answer larger than this is refused: DynamoDB's item calls answer a few hundred bytes. */
const MAX_BODY_BYTES = 16 * 1024 * 1024;

/**
 * A minimal DynamoDB JSON client over `fetch`, for runtimes with Web APIs only: SigV4 with
 * WebCrypto (`aws/sigv4-web.ts`, signing key cached per day), one attempt per call, through the
 * remote-store kit as the node:https client (`client.ts`) is: a circuit breaker per endpoint
 * (`RemoteGuard`) and a call timeout (`answeredInTime`), after which the request is aborted, so
 * a hung endpoint holds no request open. The runtime's `fetch` keeps its connections; it cannot
 * resend a request whose kept-alive connection the server had just closed, as the node:https
 * client does: that call fails, and the rule's fail mode decides.
 *
 * `fetch` does not say when its connection is up. So a fresh client's calls are connection
 * setup for the decision budget (`StoreCallProgress.connecting`) until one of them has settled,
 * and for no longer than `connectTimeoutMs` after the first began: an endpoint that accepts and
 * never answers costs the first decisions at most the connect budget, and later ones the
 * budget, as with the node:https client.
 */
export class DynamoDbFetchClient implements DynamoDbClient {
  readonly region: string;
  readonly #url: string;
  readonly #host: string;
  readonly #credentials: AwsCredentials | AwsCredentialsProvider | undefined;
  readonly #timeoutMs: number;
  readonly #connectTimeoutMs: number;
  readonly #guard: RemoteGuard;
  /** Calls under way, aborted by `close()`. */
  readonly #inFlight = new Set<AbortController>();
  #signingKey: { date: string; secret: string; key: CryptoKey } | undefined;
  /** True once a call has settled: the connection is set up (or known not to be). */
  #warm = false;
  /** Monotonic ms after which calls are no longer connection setup (set by the first call). */
  #setupUntil: number | undefined;

  constructor(options: DynamoDbFetchClientOptions) {
    if (typeof EDGELIMIT_BUNDLE === "undefined")
      checkOptions("DynamoDbFetchClient", options, dynamodbFetchClientShape(), {
        code: "EL_STORE_OPTION",
      });
    this.region = options.region;
    const url = httpEndpoint(options.endpoint ?? endpointFor(options.region), {
      option: "dynamodbFetchStore: endpoint",
      example: "a URL such as https://dynamodb.eu-west-1.amazonaws.com",
      plainHttp: "a local server",
      credentials: "pass them as the credentials option",
    });
    this.#url = url.href;
    this.#host = url.host;
    this.#credentials = options.credentials;
    this.#timeoutMs = positiveMs(
      options.requestTimeoutMs ?? 3000,
      "dynamodbFetchStore",
      "requestTimeoutMs",
    );
    this.#connectTimeoutMs = positiveMs(
      options.connectTimeoutMs ?? 1000,
      "dynamodbFetchStore",
      "connectTimeoutMs",
    );
    this.#guard = new RemoteGuard({
      name: `dynamodb ${url.host}`,
      owner: "dynamodbFetchStore",
      breaker: options.breaker,
    });
  }

  get guard(): RemoteGuard {
    return this.#guard;
  }

  status(): StoreStatus {
    return statusOf([this.#guard]);
  }

  /** Calls one DynamoDB operation (`UpdateItem`, `Query`...) and resolves to its JSON answer. */
  async call<T>(operation: string, input: object, options?: CallOptions): Promise<T> {
    const body = JSON.stringify(input);
    // Signed first: missing credentials are a mistake to fix, not the endpoint failing.
    const headers = await this.#sign(operation, body);
    return guardedCall<T>(
      this.#guard,
      async (progress) => {
        const setupDone = this.#setup(progress);
        try {
          return await this.#post(operation, headers, body);
        } finally {
          this.#warm = true;
          setupDone?.();
        }
      },
      options?.progress,
      secretFields(headers),
    );
  }

  /** Reports a fresh client's call as connection setup (see the class), until it may no longer. */
  #setup(progress: StoreCallProgress | undefined): (() => void) | undefined {
    if (this.#warm || progress === undefined) return undefined;
    const now = monotonicNow();
    this.#setupUntil ??= now + this.#connectTimeoutMs;
    const left = this.#setupUntil - now;
    if (left <= 0) return undefined;
    const done = progress.connecting();
    const timer = setTimeout(done, left);
    return () => {
      clearTimeout(timer);
      done();
    };
  }

  /** Aborts every call in flight; they fail. Nothing else is held open. */
  close(): void {
    for (const abort of this.#inFlight) abort.abort();
  }

  async #post(
    operation: string,
    headers: Record<string, string>,
    body: string,
  ): Promise<RawAnswer> {
    const abort = new AbortController();
    this.#inFlight.add(abort);
    try {
      return await answeredInTime(
        this.#exchange(headers, body, abort.signal),
        this.#timeoutMs,
        `DynamoDB ${operation} to ${this.#host}`,
      );
    } catch (error) {
      abort.abort();
      if (error instanceof EdgelimitError) throw error;
      throw new EdgelimitError("EL_STORE_FAILED", `DynamoDB ${operation}: ${reasonOf(error)}`);
    } finally {
      this.#inFlight.delete(abort);
    }
  }

  async #exchange(
    headers: Record<string, string>,
    body: string,
    signal: AbortSignal,
  ): Promise<RawAnswer> {
    const response = await fetch(this.#url, { method: "POST", headers, body, signal });
    return { status: response.status, text: await readBody(response) };
  }

  async #sign(operation: string, body: string): Promise<Record<string, string>> {
    const credentials = await this.#currentCredentials();
    const headers = await signAwsRequestWeb({
      ...dynamoDbRequest({
        region: this.region,
        host: this.#host,
        operation,
        body,
        credentials,
        now: new Date(),
      }),
      signingKey: (date) => this.#keyFor(date, credentials.secretAccessKey),
    });
    // fetch sends the URL's host itself (the value signed); a runtime may refuse it as a field.
    delete headers.host;
    return headers;
  }

  async #currentCredentials(): Promise<AwsCredentials> {
    const given = this.#credentials;
    if (given === undefined) return credentialsFromEnv(runtimeEnv());
    if (typeof given !== "function") return given;
    try {
      return await given();
    } catch (error) {
      if (error instanceof EdgelimitError) throw error;
      throw new EdgelimitError(
        "EL_STORE_FAILED",
        `DynamoDB credentials provider failed: ${reasonOf(error)}`,
      );
    }
  }

  async #keyFor(date: string, secret: string): Promise<CryptoKey> {
    const cached = this.#signingKey;
    if (cached !== undefined && cached.date === date && cached.secret === secret) return cached.key;
    // The key, not a promise of it: on workerd a promise belongs to the request that made it.
    const key = await deriveWebSigningKey(secret, date, this.region, "dynamodb");
    this.#signingKey = { date, secret, key };
    return key;
  }
}

/** The body as text, refused past `MAX_BODY_BYTES` whether or not its length was declared. */
async function readBody(response: Response): Promise<string> {
  const tooLarge = (): EdgelimitError =>
    new EdgelimitError(
      "EL_STORE_FAILED",
      `malformed HTTP response: body over ${MAX_BODY_BYTES} bytes`,
    );
  if (Number(response.headers.get("content-length") ?? 0) > MAX_BODY_BYTES) throw tooLarge();
  if (response.body === null) return "";
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let text = "";
  let bytes = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return text + decoder.decode();
    bytes += value.byteLength;
    if (bytes > MAX_BODY_BYTES) {
      await reader.cancel();
      throw tooLarge();
    }
    text += decoder.decode(value, { stream: true });
  }
}

/** What a failed fetch says, with the network error under undici's `TypeError: fetch failed`. */
function reasonOf(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  if (error.name === "AbortError") return "client closed";
  const cause = (error as { cause?: unknown }).cause;
  return cause instanceof Error ? `${error.message} (${cause.message})` : error.message;
}

/** `process.env` where the runtime has one (Node, Next.js middleware, Vercel, Deno, Bun). */
function runtimeEnv(): Readonly<Record<string, string | undefined>> | undefined {
  return (globalThis as { process?: { env?: Record<string, string | undefined> } }).process?.env;
}
