/**
 * Whether this is Cloudflare's runtime (workerd), which names itself in `navigator.userAgent`.
 * There a request's I/O belongs to that request: a remote store shares no call between requests
 * (`StoreTraits.requestScopedIo`: no batch across requests, no connection set up by one and
 * awaited by another).
 */
export function isWorkerd(): boolean {
  const navigator = (globalThis as { navigator?: { userAgent?: string } }).navigator;
  return navigator?.userAgent === "Cloudflare-Workers";
}
