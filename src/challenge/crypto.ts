/**
 * Web Crypto helpers shared by passes and proof-of-work challenges. Only `crypto.subtle` and
 * `crypto.getRandomValues`, so the same code runs in Node, Workers and Lambda@Edge.
 */

const encoder = new TextEncoder();

export function base64UrlEncode(bytes: Uint8Array): string {
  let binary = "";
  for (const byte of bytes) binary += String.fromCharCode(byte);
  return btoa(binary).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

/** Undefined when the text is not base64url. */
export function base64UrlDecode(text: string): Uint8Array | undefined {
  if (!/^[A-Za-z0-9_-]*$/.test(text)) return undefined;
  const padded = text.replace(/-/g, "+").replace(/_/g, "/") + "===".slice((text.length + 3) % 4);
  try {
    const binary = atob(padded);
    const bytes = new Uint8Array(binary.length);
    for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
    return bytes;
  } catch {
    return undefined;
  }
}

export function randomToken(byteLength: number): string {
  return base64UrlEncode(crypto.getRandomValues(new Uint8Array(byteLength)));
}

export function importHmacKey(secret: string): Promise<CryptoKey> {
  return crypto.subtle.importKey(
    "raw",
    encoder.encode(secret),
    { name: "HMAC", hash: "SHA-256" },
    false,
    ["sign"],
  );
}

export async function hmac(key: CryptoKey, message: string): Promise<Uint8Array> {
  return new Uint8Array(await crypto.subtle.sign("HMAC", key, encoder.encode(message)));
}

/**
 * Compares two MACs in time that depends only on their length, so that an attacker who times
 * the answers learns nothing about how many leading bytes of a forged MAC were right.
 */
export function constantTimeEqual(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  let difference = 0;
  for (let i = 0; i < a.length; i++) difference |= (a[i] as number) ^ (b[i] as number);
  return difference === 0;
}

export async function sha256(text: string): Promise<Uint8Array> {
  return new Uint8Array(await crypto.subtle.digest("SHA-256", encoder.encode(text)));
}

export function leadingZeroBits(bytes: Uint8Array): number {
  let bits = 0;
  for (const byte of bytes) {
    if (byte === 0) {
      bits += 8;
      continue;
    }
    return bits + Math.clz32(byte) - 24;
  }
  return bits;
}

/**
 * Signs with the current key and accepts the current or the previous one, so a secret can be
 * rotated without logging everybody out: deploy the new secret with the old one as
 * `previousSecret`, and drop the old one once the longest-lived token has expired.
 */
export class KeyRing {
  readonly #keys: Promise<CryptoKey[]>;

  constructor(secrets: readonly string[]) {
    this.#keys = Promise.all(secrets.map((secret) => importHmacKey(secret)));
  }

  async sign(message: string): Promise<string> {
    const [current] = await this.#keys;
    return base64UrlEncode(await hmac(current as CryptoKey, message));
  }

  async verify(message: string, mac: string): Promise<boolean> {
    const presented = base64UrlDecode(mac);
    // The last base64 character carries spare bits; only the canonical spelling is accepted,
    // so one MAC has exactly one valid token.
    if (presented === undefined || base64UrlEncode(presented) !== mac) return false;
    let valid = false;
    // Every key is tried, so the answer takes as long whichever key signed it.
    for (const key of await this.#keys) {
      if (constantTimeEqual(await hmac(key, message), presented)) valid = true;
    }
    return valid;
  }
}
