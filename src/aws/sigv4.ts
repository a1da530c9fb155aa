/**
 * AWS Signature Version 4 with node:crypto: synchronous HMAC, so a cold start signs its first
 * request without waiting on WebCrypto (docs/aws.md, "Why a small SigV4 client"). One signer
 * for every AWS request edgelimit makes: the DynamoDB store's calls and the lists' S3 and
 * DynamoDB reads (`src/lists/sources.ts`).
 */
import { createHash, createHmac } from "node:crypto";

export interface AwsCredentials {
  readonly accessKeyId: string;
  readonly secretAccessKey: string;
  readonly sessionToken?: string | undefined;
}

export interface AwsRequestToSign {
  readonly method: string;
  /** `host[:port]`, as sent in the `host` field. */
  readonly host: string;
  /** The path as it goes on the wire, already percent-encoded (`/bucket/deny/current.json`). */
  readonly path: string;
  readonly service: string;
  readonly region: string;
  /** Further fields to sign and send (lower-case names): `content-type`, `x-amz-target`. */
  readonly headers?: Readonly<Record<string, string>>;
  readonly body: string;
  readonly credentials: AwsCredentials;
  readonly now: Date;
  /** A cached signing key for the date (`YYYYMMDD`); derived from the secret when absent. */
  readonly signingKey?: (date: string) => Buffer;
}

/**
 * The fields to send with the request: the given ones plus `host`, `x-amz-date`,
 * `x-amz-security-token` (temporary credentials), `x-amz-content-sha256` (S3, which requires
 * it) and `authorization`, every one of them signed. No query string: edgelimit sends none.
 */
export function signAwsRequest(input: AwsRequestToSign): Record<string, string> {
  const { credentials } = input;
  const amzDate = input.now
    .toISOString()
    .replace(/[-:]/g, "")
    .replace(/\.\d{3}/, "");
  const date = amzDate.slice(0, 8);
  const bodyHash = sha256Hex(input.body);
  const headers: Record<string, string> = { ...input.headers, host: input.host };
  headers["x-amz-date"] = amzDate;
  if (credentials.sessionToken !== undefined && credentials.sessionToken !== "") {
    headers["x-amz-security-token"] = credentials.sessionToken;
  }
  if (input.service === "s3") headers["x-amz-content-sha256"] = bodyHash;
  const names = Object.keys(headers).sort();
  const canonical = [
    input.method,
    input.path,
    "",
    ...names.map((name) => `${name}:${(headers[name] as string).trim()}`),
    "",
    names.join(";"),
    bodyHash,
  ].join("\n");
  const scope = `${date}/${input.region}/${input.service}/aws4_request`;
  const toSign = `AWS4-HMAC-SHA256\n${amzDate}\n${scope}\n${sha256Hex(canonical)}`;
  const key =
    input.signingKey?.(date) ??
    deriveSigningKey(credentials.secretAccessKey, date, input.region, input.service);
  const signature = createHmac("sha256", key).update(toSign).digest("hex");
  headers.authorization = `AWS4-HMAC-SHA256 Credential=${credentials.accessKeyId}/${scope}, SignedHeaders=${names.join(";")}, Signature=${signature}`;
  return headers;
}

export interface DynamoDbSigningInput {
  readonly region: string;
  readonly host: string;
  readonly operation: string;
  readonly body: string;
  readonly credentials: AwsCredentials;
  readonly now: Date;
  readonly signingKey?: (date: string) => Buffer;
}

/** SigV4 fields for one DynamoDB JSON call (`POST /`), `content-length` included. */
export function signDynamoDbRequest(input: DynamoDbSigningInput): Record<string, string> {
  const headers = signAwsRequest({
    method: "POST",
    host: input.host,
    path: "/",
    service: "dynamodb",
    region: input.region,
    headers: {
      "content-type": "application/x-amz-json-1.0",
      "x-amz-target": `DynamoDB_20120810.${input.operation}`,
    },
    body: input.body,
    credentials: input.credentials,
    now: input.now,
    ...(input.signingKey !== undefined ? { signingKey: input.signingKey } : {}),
  });
  headers["content-length"] = String(Buffer.byteLength(input.body));
  return headers;
}

/** The day's signing key, which a caller may cache until the date or the secret changes. */
export function deriveSigningKey(
  secret: string,
  date: string,
  region: string,
  service: string,
): Buffer {
  let key = hmac(`AWS4${secret}`, date);
  key = hmac(key, region);
  key = hmac(key, service);
  return hmac(key, "aws4_request");
}

function hmac(key: string | Buffer, data: string): Buffer {
  return createHmac("sha256", key).update(data).digest();
}

function sha256Hex(data: string): string {
  return createHash("sha256").update(data).digest("hex");
}
