/**
 * AWS Signature Version 4 without the cryptography: what is signed and how the answer is sent.
 * Two signers run these steps with their own hashes: `sigv4.ts` with node:crypto (synchronous,
 * for Node and Lambda@Edge) and `sigv4-web.ts` with WebCrypto (asynchronous, for runtimes that
 * have only Web APIs). Nothing here imports a runtime module.
 */

export interface AwsCredentials {
  readonly accessKeyId: string;
  readonly secretAccessKey: string;
  readonly sessionToken?: string | undefined;
}

export interface AwsRequestFields {
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
}

/** A request ready for its signature: the fields to send and the text whose hash is signed. */
export interface CanonicalRequest {
  /** Every field to send but `authorization`, each of them signed. */
  readonly headers: Record<string, string>;
  /** The canonical request (method, path, fields, payload hash), to hash for `stringToSign`. */
  readonly text: string;
  /** `20260214T143000Z` */
  readonly amzDate: string;
  /** `20260214`: the signing key's date. */
  readonly date: string;
  /** `20260214/eu-west-1/dynamodb/aws4_request` */
  readonly scope: string;
  readonly signedNames: string;
}

/**
 * The canonical form of `input`, given the hex SHA-256 of its body. The fields sent are the
 * given ones plus `host`, `x-amz-date`, `x-amz-security-token` (temporary credentials) and
 * `x-amz-content-sha256` (S3, which requires it). No query string: edgelimit sends none.
 */
export function canonicalRequest(input: AwsRequestFields, bodyHash: string): CanonicalRequest {
  const amzDate = input.now
    .toISOString()
    .replace(/[-:]/g, "")
    .replace(/\.\d{3}/, "");
  const date = amzDate.slice(0, 8);
  const headers: Record<string, string> = { ...input.headers, host: input.host };
  headers["x-amz-date"] = amzDate;
  const token = input.credentials.sessionToken;
  if (token !== undefined && token !== "") headers["x-amz-security-token"] = token;
  if (input.service === "s3") headers["x-amz-content-sha256"] = bodyHash;
  const names = Object.keys(headers).sort();
  const signedNames = names.join(";");
  const text = [
    input.method,
    input.path,
    "",
    ...names.map((name) => `${name}:${(headers[name] as string).trim()}`),
    "",
    signedNames,
    bodyHash,
  ].join("\n");
  const scope = `${date}/${input.region}/${input.service}/aws4_request`;
  return { headers, text, amzDate, date, scope, signedNames };
}

/** What the signing key signs, given the hex SHA-256 of the canonical request's text. */
export function stringToSign(request: CanonicalRequest, canonicalHash: string): string {
  return `AWS4-HMAC-SHA256\n${request.amzDate}\n${request.scope}\n${canonicalHash}`;
}

/** The request's fields with `authorization` added, from the hex signature of `stringToSign`. */
export function signedHeaders(
  request: CanonicalRequest,
  accessKeyId: string,
  signature: string,
): Record<string, string> {
  const headers = request.headers;
  headers.authorization = `AWS4-HMAC-SHA256 Credential=${accessKeyId}/${request.scope}, SignedHeaders=${request.signedNames}, Signature=${signature}`;
  return headers;
}

/**
 * The messages the day's signing key is derived from, each HMAC'd with the key of the step
 * before, the first with `AWS4` + the secret.
 */
export function signingKeySteps(date: string, region: string, service: string): string[] {
  return [date, region, service, "aws4_request"];
}

/** One DynamoDB JSON call (`POST /`), as a request to sign. */
export function dynamoDbRequest(input: {
  readonly region: string;
  readonly host: string;
  readonly operation: string;
  readonly body: string;
  readonly credentials: AwsCredentials;
  readonly now: Date;
}): AwsRequestFields {
  return {
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
  };
}
