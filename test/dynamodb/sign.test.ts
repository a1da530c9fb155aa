import { AwsV4Signer } from "aws4fetch";
import { describe, expect, it } from "vitest";
import { signAwsRequest } from "../../src/aws/sigv4.js";

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

  it("signs a DynamoDB POST with extra fields as aws4fetch does", async () => {
    const body = JSON.stringify({ TableName: "lists", Key: { PK: { S: "allow" } } });
    const ours = signAwsRequest({
      method: "POST",
      host: "dynamodb.us-east-1.amazonaws.com",
      path: "/",
      service: "dynamodb",
      region: "us-east-1",
      headers: {
        "content-type": "application/x-amz-json-1.0",
        "x-amz-target": "DynamoDB_20120810.GetItem",
      },
      body,
      credentials,
      now,
    });
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
  });
});
