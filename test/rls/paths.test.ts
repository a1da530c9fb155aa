/**
 * `edgelimit rls --policy`: a rule's path matches however a proxy hands the request's path
 * over, at forward-auth's `/check/caddy` and in a descriptor's `:path` over gRPC: escaped in either
 * case, or as the UTF-8 text Envoy's descriptors carry; and in every letter case, since the
 * origin behind the proxy is not known here.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { HOUR_MS, withinOneWindow } from "../support/windows.js";
import { grpcJsClient, type RlsClient, type RlsProcess, startRls } from "./harness.js";

let rls: RlsProcess;
let http: string;
let client: RlsClient;

beforeAll(async () => {
  rls = await startRls(["--policy", "test/rls/fixtures/paths-policy.yaml"]);
  http = `http://127.0.0.1:${rls.httpPort}`;
  client = grpcJsClient(rls.grpcPort);
});

afterAll(async () => {
  client?.close();
  expect(await rls?.stop()).toBe(0);
});

/** Forward-auth's answer for `path`, named as nginx and as Caddy name it. */
async function check(path: string, from: string): Promise<number> {
  const response = await fetch(`${http}/check/caddy`, {
    headers: {
      "x-forwarded-uri": path,
      "x-forwarded-method": "GET",
      "x-forwarded-for": from,
    },
    redirect: "manual",
  });
  await response.arrayBuffer();
  return response.status;
}

describe("rls: a rule's path, however the proxy spells it", () => {
  it("/check limits /préférences to 5 in any escaping", async () => {
    await withinOneWindow(HOUR_MS, 10_000);
    const statuses: number[] = [];
    for (const path of [
      "/pr%C3%A9f%C3%A9rences",
      "/pr%c3%a9f%c3%a9rences",
      "/pr%C3%A9f%C3%A9rences?x=1",
      "/pr%c3%A9f%C3%a9rences/sub",
      "/pr%C3%A9f%C3%A9rences",
      "/pr%C3%A9f%C3%A9rences",
      "/pr%c3%a9f%c3%a9rences",
    ]) {
      statuses.push(await check(path, "198.51.100.70"));
    }
    expect(statuses).toEqual([200, 200, 200, 200, 200, 429, 429]);
  });

  it("/check limits /préférences to 5 when the proxy hands over the raw UTF-8 of the request line", async () => {
    // nginx's $request_uri and Caddy's RequestURI are the bytes the client sent, unescaped
    // UTF-8 included; a header value written as Latin-1 characters goes out as those bytes.
    await withinOneWindow(HOUR_MS, 10_000);
    const raw = Buffer.from("/préférences", "utf8").toString("latin1");
    const statuses: number[] = [];
    for (const path of [raw, raw, "/pr%C3%A9f%C3%A9rences", raw, `${raw}?x=1`, raw, raw]) {
      statuses.push(await check(path, "198.51.100.72"));
    }
    expect(statuses).toEqual([200, 200, 200, 200, 200, 429, 429]);
  });

  it("/check limits /api/export to 3 in every letter case", async () => {
    await withinOneWindow(HOUR_MS, 10_000);
    const statuses: number[] = [];
    for (const path of [
      "/API/EXPORT",
      "/Api/Export",
      "/api/%65xport",
      "/api/export",
      "/API/export",
    ]) {
      statuses.push(await check(path, "198.51.100.71"));
    }
    expect(statuses).toEqual([200, 200, 200, 429, 429]);
  });

  it("gRPC: a descriptor's :path as text or escaped is one path", async () => {
    await withinOneWindow(HOUR_MS, 10_000);
    const codes: string[] = [];
    for (const path of ["/préférences", "/pr%c3%a9f%c3%a9rences", "/PR%C3%A9F%C3%A9RENCES/x"]) {
      for (let i = 0; i < 2; i++) {
        const answer = await client.shouldRateLimit({
          domain: "edge",
          descriptors: [
            {
              entries: [
                { key: "remote_address", value: "192.0.2.70" },
                { key: ":path", value: path },
              ],
            },
          ],
        });
        codes.push(answer.overall_code as string);
      }
    }
    expect(codes).toEqual(["OK", "OK", "OK", "OK", "OK", "OVER_LIMIT"]);
  });
});
