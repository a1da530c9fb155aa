import { type AwsCredentials, signAwsRequest } from "../aws/sigv4.js";
import { EdgelimitError } from "../core/errors.js";
import { cidrSetOf, parseListBody } from "./parse.js";
import type { ListSource } from "./refreshing.js";

export interface FetchSourceOptions {
  readonly fetch?: typeof fetch;
  /** A slow source must not pile up loads (seed: a store call without a timeout). */
  readonly timeoutMs?: number;
}

export type { AwsCredentials } from "../aws/sigv4.js";

/** The credentials the AWS runtimes (Lambda, Lambda@Edge, ECS with env) put in the environment. */
export function awsCredentialsFromEnv(
  env: Readonly<Record<string, string | undefined>>,
): AwsCredentials {
  const accessKeyId = env.AWS_ACCESS_KEY_ID;
  const secretAccessKey = env.AWS_SECRET_ACCESS_KEY;
  if (accessKeyId === undefined || secretAccessKey === undefined) {
    throw new EdgelimitError(
      "EL_POLICY_SECRET_MISSING",
      "S3 and DynamoDB lists need AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN for temporary credentials) in the environment",
    );
  }
  const sessionToken = env.AWS_SESSION_TOKEN;
  return sessionToken === undefined || sessionToken === ""
    ? { accessKeyId, secretAccessKey }
    : { accessKeyId, secretAccessKey, sessionToken };
}

async function readOk(response: Response, description: string): Promise<string> {
  const body = await response.text();
  if (!response.ok) {
    throw new EdgelimitError(
      "EL_LIST_SOURCE",
      `${description} answered HTTP ${response.status}: ${body.slice(0, 200)}`,
    );
  }
  return body;
}

/** A JSON (or one-per-line) list served over HTTP(S). */
export function httpListSource(url: string, options: FetchSourceOptions = {}): ListSource {
  const description = url;
  return {
    description,
    async load() {
      const response = await (options.fetch ?? fetch)(url, {
        headers: { accept: "application/json, text/plain" },
        signal: AbortSignal.timeout(options.timeoutMs ?? 5000),
      });
      return parseListBody(await readOk(response, description), description);
    },
  };
}

export interface S3ListOptions extends FetchSourceOptions {
  readonly bucket: string;
  readonly key: string;
  readonly region: string;
  /** Path-style endpoint (MinIO, LocalStack, tests); virtual-hosted AWS S3 when absent. */
  readonly endpoint?: string;
  readonly credentials: AwsCredentials;
}

/** A list object in S3, read with a SigV4-signed GET. */
export function s3ListSource(options: S3ListOptions): ListSource {
  const encodedKey = options.key.split("/").map(encodeRfc3986).join("/");
  const url = new URL(
    options.endpoint === undefined
      ? `https://${options.bucket}.s3.${options.region}.amazonaws.com/${encodedKey}`
      : `${options.endpoint.replace(/\/+$/, "")}/${options.bucket}/${encodedKey}`,
  );
  const description = `s3://${options.bucket}/${options.key}`;
  return {
    description,
    async load() {
      const headers = signAwsRequest({
        method: "GET",
        host: url.host,
        path: url.pathname,
        service: "s3",
        region: options.region,
        body: "",
        credentials: options.credentials,
        now: new Date(),
      });
      const response = await (options.fetch ?? fetch)(url, {
        method: "GET",
        headers,
        signal: AbortSignal.timeout(options.timeoutMs ?? 5000),
      });
      return parseListBody(await readOk(response, description), description);
    },
  };
}

export interface DynamoDbListOptions extends FetchSourceOptions {
  readonly table: string;
  readonly region: string;
  /** The item's primary key, attribute name to string value (`{ PK: "allowlist" }`). */
  readonly key: Readonly<Record<string, string>>;
  /** Attribute holding the list: a string set, a list of strings, or a JSON/text string. */
  readonly attribute: string;
  readonly endpoint?: string;
  readonly credentials: AwsCredentials;
}

type AttributeValue = { S?: string; SS?: string[]; L?: AttributeValue[] };

/** One DynamoDB item, read with a signed GetItem (eventually consistent: cheap, and fresh enough). */
export function dynamoDbListSource(options: DynamoDbListOptions): ListSource {
  const url = new URL(options.endpoint ?? `https://dynamodb.${options.region}.amazonaws.com/`);
  const key: Record<string, AttributeValue> = {};
  for (const [name, value] of Object.entries(options.key)) key[name] = { S: value };
  const body = JSON.stringify({
    TableName: options.table,
    Key: key,
    ProjectionExpression: "#list",
    ExpressionAttributeNames: { "#list": options.attribute },
  });
  const description = `dynamodb://${options.table}/${Object.values(options.key).join("/")}#${options.attribute}`;
  return {
    description,
    async load() {
      const headers = signAwsRequest({
        method: "POST",
        host: url.host,
        path: url.pathname,
        service: "dynamodb",
        region: options.region,
        headers: {
          "content-type": "application/x-amz-json-1.0",
          "x-amz-target": "DynamoDB_20120810.GetItem",
        },
        body,
        credentials: options.credentials,
        now: new Date(),
      });
      const response = await (options.fetch ?? fetch)(url, {
        method: "POST",
        headers,
        body,
        signal: AbortSignal.timeout(options.timeoutMs ?? 5000),
      });
      const text = await readOk(response, description);
      const item = (JSON.parse(text) as { Item?: Record<string, AttributeValue> }).Item;
      if (item === undefined) {
        // A missing item is an error, not an empty list: a typo in the key must not silently
        // turn a deny list off.
        throw new EdgelimitError("EL_LIST_SOURCE", `${description}: no such item`);
      }
      const value = item[options.attribute];
      if (value?.SS !== undefined) return cidrSetOf(value.SS, description);
      if (value?.L !== undefined)
        return cidrSetOf(
          value.L.map((entry) => entry.S ?? null),
          description,
        );
      if (value?.S !== undefined) return parseListBody(value.S, description);
      throw new EdgelimitError(
        "EL_LIST_SOURCE",
        `${description}: attribute ${options.attribute} is missing or not a string set, list or string`,
      );
    },
  };
}

/** A path segment as SigV4 and S3 encode it: everything but unreserved characters. */
function encodeRfc3986(segment: string): string {
  return encodeURIComponent(segment).replace(
    /[!'()*]/g,
    (character) => `%${character.charCodeAt(0).toString(16).toUpperCase()}`,
  );
}
