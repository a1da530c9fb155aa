/**
 * The one way a store's secrets are kept out of what it says: every message that carries a
 * store URL or something an endpoint answered (an error body may echo the request's
 * `Authorization` field) passes through `redact` before it becomes an error, a verdict's
 * `storeError`, an `onStoreError` argument or a log line.
 */

/** `scheme://user:password@`: the credentials of a URL, wherever it stands in the text. */
const URL_CREDENTIALS = /\b([a-z][a-z0-9+.-]*:\/\/)[^@/\s"'<>]*@/gi;
const HIDDEN = "***";

/**
 * `text` with every URL's credentials hidden (`redis+https://***@host`) and every one of
 * `secrets` (a token, a signature) hidden as written, as JSON writes it and as a URL encodes it,
 * since an echoed body may hold any of the three. Empty secrets are ignored.
 */
export function redact(text: string, secrets: readonly (string | undefined)[] = []): string {
  let hidden = text.replace(URL_CREDENTIALS, (_match, scheme: string) => `${scheme}${HIDDEN}@`);
  for (const secret of secrets) {
    if (secret === undefined || secret === "") continue;
    for (const spelling of new Set([
      secret,
      JSON.stringify(secret).slice(1, -1),
      encodeURIComponent(secret),
    ])) {
      hidden = hidden.split(spelling).join(HIDDEN);
    }
  }
  return hidden;
}
