import { type AwsCredentials, deriveSigningKey, signDynamoDbRequest } from "../../aws/sigv4.js";
import { EdgelimitError } from "../../core/errors.js";
import { checkOptions, type OptionsShape, required } from "../../core/options.js";
import type { StoreStatus } from "../../core/types.js";
import { breakerOption, type CircuitBreakerOptions } from "../remote/breaker.js";
import { RemoteGuard } from "../remote/guard.js";
import { statusOf } from "../remote/health.js";
import { HttpPool, type HttpResponse } from "./http-pool.js";
import { credentials, REGION } from "./options.js";
import {
  type CallOptions,
  credentialsFromEnv,
  type DynamoDbClient,
  type DynamoDbTransport,
  endpointFor,
  guardedCall,
  secretFields,
} from "./protocol.js";

export type { AwsCredentials } from "../../aws/sigv4.js";
export {
  type AttributeValue,
  DynamoDbError,
  type DynamoDbTransport,
} from "./protocol.js";

export interface DynamoDbClientOptions {
  readonly region: string;
  /** `http://127.0.0.1:8000` for a local server; default `https://dynamodb.<region>.amazonaws.com`. */
  readonly endpoint?: string | undefined;
  /** Default: the standard environment variables, read on first use (Lambda sets them). */
  readonly credentials?: AwsCredentials | undefined;
  /** A request still unanswered after this long is abandoned (default 3000 ms). */
  readonly requestTimeoutMs?: number | undefined;
  /** Sockets kept open per endpoint (default 64). */
  readonly maxSockets?: number | undefined;
  /**
   * How long a new socket may take to be ready: DNS, TCP and TLS (default 1000 ms). See
   * `HttpPoolOptions.connectTimeoutMs`.
   */
  readonly connectTimeoutMs?: number | undefined;
  /**
   * The endpoint's circuit breaker (default: 5 consecutive failures open it for 250 ms), or
   * `false` for none. Failures are calls without a complete answer (refused, reset, timed out,
   * a socket that never became ready) and 5xx answers; an answer such as a failed condition is
   * the server working.
   */
  readonly breaker?: CircuitBreakerOptions | false | undefined;
  /**
   * Certificates to trust instead of Node's bundled roots (a test server's self-signed
   * certificate). Certificate verification is never turned off.
   */
  readonly ca?: string | Buffer | undefined;
  /**
   * Sends each call to this instead of over HTTP: no socket, no signing, no JSON (the simulator's
   * in-process table model, `src/simulate/`). Default: HTTPS to `endpoint`.
   */
  readonly transport?: DynamoDbTransport | undefined;
}

export function dynamodbClientShape() {
  return {
    region: required(REGION),
    endpoint: "string",
    credentials: credentials(),
    requestTimeoutMs: "number",
    maxSockets: "number",
    connectTimeoutMs: "number",
    breaker: breakerOption(),
    ca: ["string", "object"],
    transport: "object",
  } satisfies OptionsShape<DynamoDbClientOptions>;
}

/**
 * A minimal DynamoDB JSON client: SigV4 signing with node:crypto (synchronous HMAC, cached
 * signing key) over `node:https` with a keep-alive Agent (`http-pool.ts`, loaded by the first
 * call). It is a few KB minified, which is what a Lambda@Edge cold start needs; the AWS SDK v3
 * is two orders of magnitude larger (see docs/aws.md). It makes exactly one attempt per call:
 * retries belong to the caller's time budget, not to the client. Calls over HTTP go through the
 * remote-store kit's guard (`stores/remote/guard.ts`): a circuit breaker per endpoint.
 */
export class DynamoDbHttpClient implements DynamoDbClient {
  readonly region: string;
  readonly #url: URL;
  readonly #credentials: AwsCredentials | undefined;
  readonly #timeoutMs: number;
  readonly #pool: HttpPool | undefined;
  readonly #transport: DynamoDbTransport | undefined;
  readonly #guard: RemoteGuard;
  #signingKey: { date: string; secret: string; key: Buffer } | undefined;

  constructor(options: DynamoDbClientOptions) {
    if (typeof EDGELIMIT_BUNDLE === "undefined")
      checkOptions("DynamoDbHttpClient", options, dynamodbClientShape(), {
        code: "EL_STORE_OPTION",
      });
    this.region = options.region;
    this.#url = new URL(options.endpoint ?? endpointFor(options.region));
    this.#credentials = options.credentials;
    this.#timeoutMs = options.requestTimeoutMs ?? 3000;
    this.#transport = options.transport;
    this.#guard = new RemoteGuard({
      name: `dynamodb ${this.#url.host}`,
      owner: "dynamodbStore",
      breaker: options.breaker,
    });
    if (this.#transport !== undefined) return;
    // node:https, not a client of our own: over TLS, the path production uses, our own
    // HTTP/1.1 client answered a fresh process's first call no sooner (docs/aws.md).
    this.#pool = new HttpPool({
      origin: this.#url,
      maxSockets: options.maxSockets,
      ca: options.ca,
      connectTimeoutMs: options.connectTimeoutMs,
    });
  }

  /** The endpoint's calls as health pages show them (HTTP only; a transport has none). */
  get guard(): RemoteGuard {
    return this.#guard;
  }

  status(): StoreStatus {
    return statusOf([this.#guard]);
  }

  /**
   * Calls one DynamoDB operation (`UpdateItem`, `Query`...) and resolves to its JSON answer.
   * A call that went out on a kept-alive socket the server had just closed is sent again once
   * (see `HttpPool`): for an increment that can only ever count one too many. A call whose
   * repetition would count too few (a refund) passes `resendOnStaleSocket: false`.
   */
  async call<T>(operation: string, input: object, options?: CallOptions): Promise<T> {
    const transport = this.#transport;
    if (transport !== undefined) {
      return transport.send(this.region, operation, input, options?.progress) as Promise<T>;
    }
    const pool = this.#pool as HttpPool;
    const body = JSON.stringify(input);
    // Signed first: missing credentials are a mistake to fix, not the endpoint failing.
    const headers = this.#sign(operation, body, new Date());
    return guardedCall<T>(
      this.#guard,
      async (progress) => {
        let answer: HttpResponse;
        try {
          answer = await pool.post(
            "/",
            headers,
            body,
            this.#timeoutMs,
            options?.resendOnStaleSocket ?? true,
            progress,
          );
        } catch (error) {
          const reason = error instanceof Error ? error.message : String(error);
          const code = error instanceof EdgelimitError ? error.code : "EL_STORE_FAILED";
          throw new EdgelimitError(
            code === "EL_STORE_TIMEOUT" ? code : "EL_STORE_FAILED",
            code === "EL_STORE_TIMEOUT"
              ? `DynamoDB ${operation} timed out (${reason})`
              : `DynamoDB ${operation}: ${reason}`,
          );
        }
        return { status: answer.status, text: answer.body.toString("utf8") };
      },
      options?.progress,
      secretFields(headers),
    );
  }

  /** Opens a connection ahead of the first call (TCP and TLS handshakes done in advance). */
  preconnect(): void {
    this.#pool?.preconnect();
  }

  /** Closes every socket; calls in flight fail. */
  close(): void {
    this.#pool?.close();
  }

  #sign(operation: string, body: string, now: Date): Record<string, string> {
    const credentials = this.#credentials ?? credentialsFromEnv(process.env);
    return signDynamoDbRequest({
      region: this.region,
      host: this.#url.host,
      operation,
      body,
      credentials,
      now,
      signingKey: (date) => this.#keyFor(date, credentials.secretAccessKey),
    });
  }

  #keyFor(date: string, secret: string): Buffer {
    const cached = this.#signingKey;
    if (cached !== undefined && cached.date === date && cached.secret === secret) return cached.key;
    const key = deriveSigningKey(secret, date, this.region, "dynamodb");
    this.#signingKey = { date, secret, key };
    return key;
  }
}
