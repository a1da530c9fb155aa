import { AwsV4Signer } from "aws4fetch";
import { describe, expect, it } from "vitest";
import { deriveSigningKey, signAwsRequest } from "../../src/aws/sigv4.js";
import type { AwsRequestFields } from "../../src/aws/sigv4-request.js";
import { dynamoDbRequest } from "../../src/aws/sigv4-request.js";
import { deriveWebSigningKey, signAwsRequestWeb } from "../../src/aws/sigv4-web.js";

/**
 * AWS's SigV4 test suite (aws-sig-v4-test-suite, as awslabs/aws-c-auth carries it): the cases
 * without a query string, which edgelimit never sends. Each signature is AWS's published one.
 */
const SUITE_TOKEN =
  "AQoDYXdzEPT//////////wEXAMPLEtc764bNrC9SAPBSM22wDOk4x4HIZ8j4FZTwdQWLWsKWHGBuFqwAeMicRXmxfpSPfIeoIYRqTflfKD8YUuwthAx7mSEI/qkPpKPi/kMcGdQrmGdeehM4IC1NtBmUpp2wUE8phUZampKsburEDy0KPkyQDYwT7WZ0wq5VSXDvp75YU9HFvlRd8Tx6q6fE8YQcHNVXAkiY9q6d+xo0rKwT38xVqr7ZD0u0iPPkUL64lIZbqBAz+scqKmlzm8FDrypNC9Yjc8fPOLn9FX9KSYvKTr4rvx3iSIlTJabIQwj2ICCR/oLxBA==";
const SUITE: readonly {
  readonly name: string;
  readonly method: string;
  readonly headers?: Record<string, string>;
  readonly body?: string;
  readonly sessionToken?: string;
  readonly signedHeaders: string;
  readonly signature: string;
}[] = [
  {
    name: "get-vanilla",
    method: "GET",
    signedHeaders: "host;x-amz-date",
    signature: "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31",
  },
  {
    name: "post-vanilla",
    method: "POST",
    signedHeaders: "host;x-amz-date",
    signature: "5da7c1a2acd57cee7505fc6676e4e544621c30862966e37dddb68e92efbe5d6b",
  },
  {
    name: "post-header-key-sort",
    method: "POST",
    headers: { "my-header1": "value1" },
    signedHeaders: "host;my-header1;x-amz-date",
    signature: "c5410059b04c1ee005303aed430f6e6645f61f4dc9e1461ec8f8916fdf18852c",
  },
  {
    name: "post-header-value-case",
    method: "POST",
    headers: { "my-header1": "VALUE1" },
    signedHeaders: "host;my-header1;x-amz-date",
    signature: "cdbc9802e29d2942e5e10b5bccfdd67c5f22c7c4e8ae67b53629efa58b974b7d",
  },
  {
    name: "post-x-www-form-urlencoded",
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded" },
    body: "Param1=value1",
    signedHeaders: "content-type;host;x-amz-date",
    signature: "ff11897932ad3f4e8b18135d722051e5ac45fc38421b1da7b9d196a0fe09473a",
  },
  {
    name: "post-sts-header-before (temporary credentials)",
    method: "POST",
    sessionToken: SUITE_TOKEN,
    signedHeaders: "host;x-amz-date;x-amz-security-token",
    signature: "85d96828115b5dc0cfc3bd16ad9e210dd772bbebba041836c64533a82be05ead",
  },
];

const SIGNERS: readonly [string, (input: AwsRequestFields) => Promise<Record<string, string>>][] = [
  ["node:crypto", async (input) => signAwsRequest(input)],
  ["WebCrypto", signAwsRequestWeb],
];

describe("both signers against AWS's SigV4 test suite", () => {
  for (const [signer, sign] of SIGNERS) {
    for (const vector of SUITE) {
      it(`${signer}: ${vector.name}`, async () => {
        const headers = await sign({
          method: vector.method,
          host: "example.amazonaws.com",
          path: "/",
          service: "service",
          region: "us-east-1",
          ...(vector.headers === undefined ? {} : { headers: vector.headers }),
          body: vector.body ?? "",
          credentials: {
            accessKeyId: "AKIDEXAMPLE",
            secretAccessKey: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
            sessionToken: vector.sessionToken,
          },
          now: new Date(Date.UTC(2015, 7, 30, 12, 36, 0)),
        });
        expect(headers.authorization).toBe(
          `AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, SignedHeaders=${vector.signedHeaders}, Signature=${vector.signature}`,
        );
        expect(headers["x-amz-date"]).toBe("20150830T123600Z");
      });
    }
  }

  it("node:crypto derives the signing key of AWS's documented example", () => {
    // "Examples of how to derive a signing key for Signature Version 4" (AWS General Reference).
    const key = deriveSigningKey(
      "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
      "20120215",
      "us-east-1",
      "iam",
    );
    expect(key.toString("hex")).toBe(
      "f4780e2d9f65fa895f9c67b32ce1baf0b0d8a43505a000a1a9e090d414db404d",
    );
  });

  it("WebCrypto signs with a cached key exactly as with one derived for the call", async () => {
    const credentials = { accessKeyId: "AKIDEXAMPLE", secretAccessKey: "secret/with+chars" };
    const request = dynamoDbRequest({
      region: "eu-west-1",
      host: "dynamodb.eu-west-1.amazonaws.com",
      operation: "UpdateItem",
      body: '{"TableName":"rate-limits"}',
      credentials,
      now: new Date(Date.UTC(2026, 1, 14, 14, 30, 0)),
    });
    const key = await deriveWebSigningKey("secret/with+chars", "20260214", "eu-west-1", "dynamodb");
    const cached = await signAwsRequestWeb({ ...request, signingKey: async () => key });
    expect(cached.authorization).toBe((await signAwsRequestWeb(request)).authorization);
    expect(cached.authorization).toBe(signAwsRequest(request).authorization);
  });
});

/** aws4fetch is an independent SigV4 implementation: the oracle for ours. */
describe("signAwsRequest", () => {
  const credentials = {
    accessKeyId: "AKIDEXAMPLE",
    secretAccessKey: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
    sessionToken: "session-token-example",
  };
  const now = new Date(Date.UTC(2026, 1, 14, 14, 30, 0));

  it("signs an S3 GET (payload hash header, session token, encoded key) as aws4fetch does", async () => {
    const path = "/edge-lists/deny/current%20list%28v2%29.json";
    const ours = signAwsRequest({
      method: "GET",
      host: "s3.eu-west-1.amazonaws.com",
      path,
      service: "s3",
      region: "eu-west-1",
      body: "",
      credentials,
      now,
    });
    const reference = await new AwsV4Signer({
      method: "GET",
      url: `https://s3.eu-west-1.amazonaws.com${path}`,
      headers: { "x-amz-content-sha256": ours["x-amz-content-sha256"] as string },
      ...credentials,
      service: "s3",
      region: "eu-west-1",
      datetime: "20260214T143000Z",
      allHeaders: true,
    }).sign();
    expect(ours.authorization).toBe(reference.headers.get("authorization"));
    expect(ours["x-amz-security-token"]).toBe("session-token-example");
  });

  it("signs a DynamoDB POST with extra fields as aws4fetch does, with either signer", async () => {
    const body = JSON.stringify({ TableName: "lists", Key: { PK: { S: "allow" } } });
    const request = dynamoDbRequest({
      region: "us-east-1",
      host: "dynamodb.us-east-1.amazonaws.com",
      operation: "GetItem",
      body,
      credentials,
      now,
    });
    const ours = signAwsRequest(request);
    const reference = await new AwsV4Signer({
      method: "POST",
      url: "https://dynamodb.us-east-1.amazonaws.com/",
      headers: {
        "content-type": "application/x-amz-json-1.0",
        "x-amz-target": "DynamoDB_20120810.GetItem",
      },
      body,
      ...credentials,
      service: "dynamodb",
      region: "us-east-1",
      datetime: "20260214T143000Z",
      allHeaders: true,
    }).sign();
    expect(ours.authorization).toBe(reference.headers.get("authorization"));
    // The WebCrypto signer gives the same fields, every one of them.
    expect(await signAwsRequestWeb(request)).toEqual(ours);
  });
});
