/**
 * What the DynamoDB stores' and clients' option shapes share (see core/options.ts): a region,
 * credentials, and a table's options. Each shape is beside its interface, which TypeScript
 * holds it to.
 */
import { fields, type OptionKind, type OptionsShape, required } from "../../core/options.js";
import { breakerOption } from "../remote/breaker.js";
import type { DynamoDbTableOptions } from "./table-options.js";

export const REGION: OptionKind = {
  describe: "a region such as eu-west-1",
  test: (value) => typeof value === "string",
};

export function credentials(): OptionKind {
  return fields(
    {
      accessKeyId: required("string"),
      secretAccessKey: required("string"),
      sessionToken: "string",
    },
    "credentials { accessKeyId, secretAccessKey, sessionToken? }",
  );
}

export function tableShape() {
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
