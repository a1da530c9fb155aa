/**
 * AWS Signature Version 4 with WebCrypto (`crypto.subtle`), for runtimes that have Web APIs and
 * no node:crypto: Next.js middleware, Vercel Edge, Deno Deploy, workerd, any bundle made for
 * the browser platform. The same request building as the Node signer (`sigv4-request.ts`); the
 * hashes are asynchronous, so signing is too. The signing key, derived by four HMACs, is
 * returned as a `CryptoKey` a caller may cache until the date or the secret changes.
 */
import {
  type AwsRequestFields,
  canonicalRequest,
  signedHeaders,
  signingKeySteps,
  stringToSign,
} from "./sigv4-request.js";

export interface WebRequestToSign extends AwsRequestFields {
  /** A cached signing key for the date (`YYYYMMDD`); derived from the secret when absent. */
  readonly signingKey?: (date: string) => Promise<CryptoKey>;
}

const encoder = new TextEncoder();

/** The fields to send with the request, `authorization` included (see `signAwsRequest`). */
export async function signAwsRequestWeb(input: WebRequestToSign): Promise<Record<string, string>> {
  const request = canonicalRequest(input, await sha256Hex(input.body));
  const key = await (input.signingKey?.(request.date) ??
    deriveWebSigningKey(
      input.credentials.secretAccessKey,
      request.date,
      input.region,
      input.service,
    ));
  const toSign = stringToSign(request, await sha256Hex(request.text));
  const signature = await crypto.subtle.sign("HMAC", key, encoder.encode(toSign));
  return signedHeaders(request, input.credentials.accessKeyId, hex(signature));
}

/** The day's signing key, as an HMAC-SHA-256 key that signs. */
export async function deriveWebSigningKey(
  secret: string,
  date: string,
  region: string,
  service: string,
): Promise<CryptoKey> {
  let key: BufferSource = encoder.encode(`AWS4${secret}`);
  for (const step of signingKeySteps(date, region, service)) {
    key = await crypto.subtle.sign("HMAC", await hmacKey(key), encoder.encode(step));
  }
  return hmacKey(key);
}

function hmacKey(raw: BufferSource): Promise<CryptoKey> {
  return crypto.subtle.importKey("raw", raw, { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
}

async function sha256Hex(data: string): Promise<string> {
  return hex(await crypto.subtle.digest("SHA-256", encoder.encode(data)));
}

function hex(bytes: ArrayBuffer): string {
  let out = "";
  for (const byte of new Uint8Array(bytes)) out += byte.toString(16).padStart(2, "0");
  return out;
}
