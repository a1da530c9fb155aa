import type { JWTVerifyOptions, JWTVerifyResult } from "jose";

/**
 * Stands in for `jose` in the Lambda@Edge bundle (the build points the core's `jose` import
 * here): jose is a third of the bundle and only a request carrying a token needs it, so it sits
 * in a chunk loaded on first use. Both functions are asynchronous in jose too, so the core sees
 * no difference. Node caches the module, so every call after the first costs one resolved
 * promise.
 */
export async function jwtVerify(
  token: string | Uint8Array,
  key: CryptoKey | Uint8Array,
  options?: JWTVerifyOptions,
): Promise<JWTVerifyResult> {
  const jose = await import("./jose-parts.js");
  return jose.jwtVerify(token, key, options);
}

export async function importSPKI(spki: string, algorithm: string): Promise<CryptoKey> {
  const jose = await import("./jose-parts.js");
  return jose.importSPKI(spki, algorithm);
}
