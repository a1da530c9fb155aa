/**
 * AWS Signature Version 4 with node:crypto: synchronous HMAC, so a cold start signs its first
 * request without waiting on WebCrypto (docs/aws.md, "Why a small SigV4 client"). The signer of
 * every AWS request edgelimit makes in Node: the DynamoDB store's calls and the lists' S3 and
 * DynamoDB reads (`src/lists/sources.ts`). What is signed is built in `sigv4-request.ts`, which
 * `sigv4-web.ts` shares for runtimes without node:crypto.
 */
import { createHash, createHmac } from "node:crypto";
import {
  type AwsRequestFields,
  canonicalRequest,
  dynamoDbRequest,
  signedHeaders,
  signingKeySteps,
  stringToSign,
} from "./sigv4-request.js";

export type { AwsCredentials } from "./sigv4-request.js";

export interface AwsRequestToSign extends AwsRequestFields {
  /** A cached signing key for the date (`YYYYMMDD`); derived from the secret when absent. */
  readonly signingKey?: ((date: string) => Buffer) | undefined;
}

/**
 * The fields to send with the request: the given ones plus `host`, `x-amz-date`,
 * `x-amz-security-token` (temporary credentials), `x-amz-content-sha256` (S3, which requires
 * it) and `authorization`, every one of them signed. No query string: edgelimit sends none.
 */
export function signAwsRequest(input: AwsRequestToSign): Record<string, string> {
  const request = canonicalRequest(input, sha256Hex(input.body));
  const key =
    input.signingKey?.(request.date) ??
    deriveSigningKey(input.credentials.secretAccessKey, request.date, input.region, input.service);
  const signature = createHmac("sha256", key)
    .update(stringToSign(request, sha256Hex(request.text)))
    .digest("hex");
  return signedHeaders(request, input.credentials.accessKeyId, signature);
}

export interface DynamoDbSigningInput {
  readonly region: string;
  readonly host: string;
  readonly operation: string;
  readonly body: string;
  readonly credentials: AwsRequestFields["credentials"];
  readonly now: Date;
  readonly signingKey?: (date: string) => Buffer;
}

/** SigV4 fields for one DynamoDB JSON call (`POST /`), `content-length` included. */
export function signDynamoDbRequest(input: DynamoDbSigningInput): Record<string, string> {
  const headers = signAwsRequest({ ...dynamoDbRequest(input), signingKey: input.signingKey });
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
  let key: string | Buffer = `AWS4${secret}`;
  for (const step of signingKeySteps(date, region, service)) {
    key = createHmac("sha256", key).update(step).digest();
  }
  return key as Buffer;
}

function sha256Hex(data: string): string {
  return createHash("sha256").update(data).digest("hex");
}
