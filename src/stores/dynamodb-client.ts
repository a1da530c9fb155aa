import { createHash, createHmac } from "node:crypto";
import {
  type ClientRequest,
  Agent as HttpAgent,
  request as httpRequest,
  type IncomingMessage,
  type RequestOptions,
} from "node:http";
import { EdgelimitError } from "../core/errors.js";

export interface AwsCredentials {
  readonly accessKeyId: string;
  readonly secretAccessKey: string;
  readonly sessionToken?: string | undefined;
}

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
}

/** An error DynamoDB answered with: `type` is the short name (`ConditionalCheckFailedException`). */
export class DynamoDbError extends EdgelimitError {
  readonly type: string;
  readonly status: number;
  /** The item as it was, when DynamoDB returns it with a failed condition. */
  readonly item: Record<string, AttributeValue> | undefined;

  constructor(
    type: string,
    status: number,
    message: string,
    item?: Record<string, AttributeValue>,
  ) {
    super("EL_STORE_FAILED", `DynamoDB ${type}: ${message}`);
    this.type = type;
    this.status = status;
    this.item = item;
  }
}

interface Transport {
  readonly agent: HttpAgent;
  readonly send: (
    options: RequestOptions,
    answer: (response: IncomingMessage) => void,
  ) => ClientRequest;
}

export type AttributeValue = { S: string } | { N: string };

const SERVICE = "dynamodb";
const TARGET_PREFIX = "DynamoDB_20120810.";

/**
 * A minimal DynamoDB JSON client: SigV4 signing with node:crypto (synchronous HMAC, cached
 * signing key) over a keep-alive node:http(s) agent. It is a few hundred bytes minified and
 * loads nothing that Node has not already loaded, which is what a Lambda@Edge cold start
 * needs; the AWS SDK v3 is two orders of magnitude larger (see docs/aws.md). It makes exactly
 * one attempt per call: retries belong to the caller's time budget, not to the client.
 */
export class DynamoDbHttpClient {
  readonly region: string;
  readonly #url: URL;
  readonly #credentials: AwsCredentials | undefined;
  readonly #timeoutMs: number;
  #transport: Transport | Promise<Transport>;
  #closed = false;
  #signingKey: { date: string; secret: string; key: Buffer } | undefined;

  constructor(options: DynamoDbClientOptions) {
    this.region = options.region;
    this.#url = new URL(options.endpoint ?? `https://dynamodb.${options.region}.amazonaws.com`);
    this.#credentials = options.credentials;
    this.#timeoutMs = options.requestTimeoutMs ?? 3000;
    const agentOptions = { keepAlive: true, maxSockets: options.maxSockets ?? 64 };
    // node:https brings node:tls, 1.5-8 ms of a fresh process's start: loaded on the first call,
    // and only for an https endpoint (a local DynamoDB-protocol server speaks plain http).
    this.#transport =
      this.#url.protocol === "https:"
        ? import("node:https").then((https) => {
            const transport = { agent: new https.Agent(agentOptions), send: https.request };
            this.#transport = transport;
            if (this.#closed) transport.agent.destroy();
            return transport;
          })
        : { agent: new HttpAgent(agentOptions), send: httpRequest };
  }

  /** Calls one DynamoDB operation (`UpdateItem`, `Query`...) and resolves to its JSON answer. */
  call<T>(operation: string, input: object): Promise<T> {
    const body = JSON.stringify(input);
    const headers = this.#sign(operation, body, new Date());
    const transport = this.#transport;
    if (transport instanceof Promise) {
      return transport.then((loaded) => this.#send<T>(loaded, operation, headers, body));
    }
    return this.#send<T>(transport, operation, headers, body);
  }

  #send<T>(
    transport: Transport,
    operation: string,
    headers: Record<string, string>,
    body: string,
  ): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const request = transport.send(
        {
          protocol: this.#url.protocol,
          hostname: this.#url.hostname,
          port: this.#url.port,
          path: "/",
          method: "POST",
          headers,
          agent: transport.agent,
          timeout: this.#timeoutMs,
        },
        (response) => readAnswer<T>(response, resolve, reject),
      );
      request.on("timeout", () =>
        request.destroy(new EdgelimitError("EL_STORE_TIMEOUT", `DynamoDB ${operation} timed out`)),
      );
      request.on("error", (error) =>
        reject(
          error instanceof EdgelimitError
            ? error
            : new EdgelimitError("EL_STORE_FAILED", `DynamoDB ${operation}: ${error.message}`),
        ),
      );
      request.end(body);
    });
  }

  close(): void {
    this.#closed = true;
    const transport = this.#transport;
    if (!(transport instanceof Promise)) transport.agent.destroy();
  }

  #sign(operation: string, body: string, now: Date): Record<string, string> {
    const credentials = this.#credentials ?? credentialsFromEnv();
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
    const key = deriveSigningKey(secret, date, this.region);
    this.#signingKey = { date, secret, key };
    return key;
  }
}

export interface SigningInput {
  readonly region: string;
  readonly host: string;
  readonly operation: string;
  readonly body: string;
  readonly credentials: AwsCredentials;
  readonly now: Date;
  /** A cached signing key for the date (`YYYYMMDD`); derived from the secret when absent. */
  readonly signingKey?: (date: string) => Buffer;
}

/** SigV4 headers for one DynamoDB JSON call (`POST /`). */
export function signDynamoDbRequest(input: SigningInput): Record<string, string> {
  const { credentials, body } = input;
  const amzDate = input.now
    .toISOString()
    .replace(/[-:]/g, "")
    .replace(/\.\d{3}/, "");
  const date = amzDate.slice(0, 8);
  const headers: Record<string, string> = {
    "content-type": "application/x-amz-json-1.0",
    host: input.host,
    "x-amz-date": amzDate,
  };
  if (credentials.sessionToken !== undefined && credentials.sessionToken !== "") {
    headers["x-amz-security-token"] = credentials.sessionToken;
  }
  headers["x-amz-target"] = TARGET_PREFIX + input.operation;
  const names = Object.keys(headers);
  const canonical = [
    "POST",
    "/",
    "",
    ...names.map((name) => `${name}:${headers[name]}`),
    "",
    names.join(";"),
    sha256Hex(body),
  ].join("\n");
  const scope = `${date}/${input.region}/${SERVICE}/aws4_request`;
  const toSign = `AWS4-HMAC-SHA256\n${amzDate}\n${scope}\n${sha256Hex(canonical)}`;
  const key =
    input.signingKey?.(date) ?? deriveSigningKey(credentials.secretAccessKey, date, input.region);
  const signature = createHmac("sha256", key).update(toSign).digest("hex");
  headers.authorization = `AWS4-HMAC-SHA256 Credential=${credentials.accessKeyId}/${scope}, SignedHeaders=${names.join(";")}, Signature=${signature}`;
  headers["content-length"] = String(Buffer.byteLength(body));
  return headers;
}

function deriveSigningKey(secret: string, date: string, region: string): Buffer {
  let key = hmac(`AWS4${secret}`, date);
  key = hmac(key, region);
  key = hmac(key, SERVICE);
  return hmac(key, "aws4_request");
}

function hmac(key: string | Buffer, data: string): Buffer {
  return createHmac("sha256", key).update(data).digest();
}

function sha256Hex(data: string): string {
  return createHash("sha256").update(data).digest("hex");
}

function credentialsFromEnv(): AwsCredentials {
  const env = process.env;
  const accessKeyId = env.AWS_ACCESS_KEY_ID;
  const secretAccessKey = env.AWS_SECRET_ACCESS_KEY;
  if (accessKeyId === undefined || secretAccessKey === undefined) {
    throw new EdgelimitError(
      "EL_BAD_ARGUMENT",
      "DynamoDB credentials missing: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (Lambda sets them) or pass credentials",
    );
  }
  return { accessKeyId, secretAccessKey, sessionToken: env.AWS_SESSION_TOKEN };
}

function readAnswer<T>(
  response: IncomingMessage,
  resolve: (value: T) => void,
  reject: (error: unknown) => void,
): void {
  const chunks: Buffer[] = [];
  response.on("data", (chunk: Buffer) => chunks.push(chunk));
  response.on("error", reject);
  response.on("end", () => {
    const text = Buffer.concat(chunks).toString("utf8");
    let parsed: Record<string, unknown> = {};
    try {
      parsed = text === "" ? {} : (JSON.parse(text) as Record<string, unknown>);
    } catch {
      reject(new DynamoDbError("InvalidResponse", response.statusCode ?? 0, text.slice(0, 200)));
      return;
    }
    const status = response.statusCode ?? 0;
    if (status >= 200 && status < 300) {
      resolve(parsed as T);
      return;
    }
    const fullType = String(parsed.__type ?? `HTTP${status}`);
    const type = fullType.slice(fullType.lastIndexOf("#") + 1);
    const message = String(parsed.message ?? parsed.Message ?? "");
    reject(
      new DynamoDbError(
        type,
        status,
        message,
        parsed.Item as Record<string, AttributeValue> | undefined,
      ),
    );
  });
}
