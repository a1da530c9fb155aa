/**
 * The DynamoDB stores' and clients' options as their run-time check sees them (see
 * core/options.ts); TypeScript holds each shape to its interface.
 */
import { fields, type OptionKind, type OptionsShape, required } from "../../core/options.js";
import { breakerOption } from "../remote/breaker.js";
import type { DynamoDbClientOptions } from "./client.js";
import type { DynamoDbFetchClientOptions } from "./fetch-client.js";
import type { DynamoDbFetchStoreOptions } from "./fetch-store.js";
import type { DynamoDbStoreOptions } from "./store.js";
import type { DynamoDbTableOptions } from "./table-options.js";

const REGION: OptionKind = {
  describe: "a region such as eu-west-1",
  test: (value) => typeof value === "string",
};

function credentials(): OptionKind {
  return fields(
    {
      accessKeyId: required("string"),
      secretAccessKey: required("string"),
      sessionToken: "string",
    },
    "credentials { accessKeyId, secretAccessKey, sessionToken? }",
  );
}

function tableShape() {
  return {
    table: "string",
    region: required(REGION),
    endpoint: "string",
    globalRegions: "array",
    remoteCacheMs: "number",
    ttlGraceSeconds: "number",
    requestTimeoutMs: "number",
    breaker: breakerOption(),
    expectedRoundTripMs: "number",
    maxCachedKeys: "number",
    leaseRegion: "string",
    leaseTable: "string",
    leaseEndpoint: "string",
    leaseRoundTripMs: "number",
    regionHolder: "boolean",
    holderTable: "string",
    regionAllowance: "boolean",
    regionEndpoints: "object",
  } satisfies OptionsShape<DynamoDbTableOptions>;
}

export function dynamodbStoreShape() {
  return {
    ...tableShape(),
    credentials: credentials(),
    maxSockets: "number",
    connectTimeoutMs: "number",
    transport: "object",
  } satisfies OptionsShape<DynamoDbStoreOptions>;
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

/** Static credentials, or a provider of temporary ones. */
export function dynamodbFetchStoreShape() {
  return {
    ...tableShape(),
    credentials: [credentials(), "function"],
    connectTimeoutMs: "number",
  } satisfies OptionsShape<DynamoDbFetchStoreOptions>;
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
