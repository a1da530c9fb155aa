import { SignJWT } from "jose";

export const JWT_SECRET = "test-secret-that-is-long-enough-for-hs256!";

/** Signs an HS256 token as an auth layer would (expiry one hour ahead unless given). */
export async function signToken(
  claims: Record<string, unknown>,
  options: { secret?: string; expiresAt?: number; now?: number } = {},
): Promise<string> {
  const now = Math.floor((options.now ?? Date.now()) / 1000);
  return new SignJWT(claims)
    .setProtectedHeader({ alg: "HS256" })
    .setIssuedAt(now)
    .setExpirationTime(options.expiresAt ?? now + 3600)
    .sign(new TextEncoder().encode(options.secret ?? JWT_SECRET));
}
