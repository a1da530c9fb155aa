import { escapeHtml } from "../html.js";

export interface PageContent {
  readonly verifyPath: string;
  readonly redirect: string;
  /** Proof of work: the signed challenge and its difficulty. */
  readonly challenge?: string;
  readonly difficulty?: number;
  /** A third-party widget instead of proof of work. */
  readonly widget?: { readonly kind: "turnstile" | "hcaptcha"; readonly siteKey: string };
  readonly failed: boolean;
  /** CSP nonce for the inline script. */
  readonly scriptNonce: string;
}

const WIDGETS = {
  turnstile: {
    script: "https://challenges.cloudflare.com/turnstile/v0/api.js",
    className: "cf-turnstile",
    origins: "https://challenges.cloudflare.com",
  },
  hcaptcha: {
    script: "https://js.hcaptcha.com/1/api.js",
    className: "h-captcha",
    origins: "https://hcaptcha.com https://*.hcaptcha.com",
  },
} as const;

/** Headers every challenge response carries: never cached, never framed, never referred. */
export function pageHeaders(content: PageContent): Record<string, string> {
  const widget = content.widget === undefined ? undefined : WIDGETS[content.widget.kind];
  const scriptSources = [`'nonce-${content.scriptNonce}'`, widget?.origins]
    .filter(Boolean)
    .join(" ");
  const frameSources = widget === undefined ? "'none'" : widget.origins;
  return {
    "content-type": "text/html; charset=utf-8",
    "cache-control": "no-store",
    "x-frame-options": "DENY",
    "referrer-policy": "no-referrer",
    "x-content-type-options": "nosniff",
    "content-security-policy": `default-src 'none'; script-src ${scriptSources}; style-src 'unsafe-inline'; frame-src ${frameSources}; connect-src ${widget?.origins ?? "'none'"}; form-action 'self'; base-uri 'none'; frame-ancestors 'none'`,
  };
}

/**
 * The page a challenged client lands on. Proof of work needs no third party: the inline script
 * hashes with Web Crypto in batches and posts the answer with a plain form, so the browser
 * follows the redirect and stores the pass cookie like any navigation.
 */
export function renderPage(content: PageContent): string {
  const action = escapeHtml(content.verifyPath);
  const redirect = escapeHtml(content.redirect);
  const notice = content.failed
    ? '<p class="failed" role="alert">That check did not pass. Trying again.</p>'
    : "";
  let body: string;
  if (content.widget !== undefined) {
    const widget = WIDGETS[content.widget.kind];
    body = `<form method="post" action="${action}">
<input type="hidden" name="redirect" value="${redirect}">
<div class="${widget.className}" data-sitekey="${escapeHtml(content.widget.siteKey)}"></div>
<button type="submit">Continue</button>
</form>
<script src="${widget.script}" async defer></script>`;
  } else {
    body = `<form id="edgelimit-challenge" method="post" action="${action}" data-difficulty="${content.difficulty ?? 0}">
<input type="hidden" name="challenge" value="${escapeHtml(content.challenge ?? "")}">
<input type="hidden" name="solution" value="">
<input type="hidden" name="redirect" value="${redirect}">
</form>
<p id="edgelimit-status" aria-live="polite">Checking your browser. This takes a few seconds.</p>
<noscript><p>This check needs JavaScript. Enable it and reload the page.</p></noscript>
<script nonce="${escapeHtml(content.scriptNonce)}">${PROOF_OF_WORK_SCRIPT}</script>`;
  }
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="robots" content="noindex">
<title>One moment</title>
<style>body{font:16px/1.5 system-ui,sans-serif;max-width:32rem;margin:4rem auto;padding:0 1rem;color:#222}.failed{color:#a00}</style>
</head>
<body>
<h1>One moment</h1>
<p>We received many requests from your connection. Please confirm you are not an automated client.</p>
${notice}
${body}
</body>
</html>`;
}

// Kept free of template placeholders: the page passes data through the form's attributes.
const PROOF_OF_WORK_SCRIPT = `
(async () => {
  const form = document.getElementById("edgelimit-challenge");
  const status = document.getElementById("edgelimit-status");
  if (!globalThis.crypto || !crypto.subtle) {
    status.textContent = "This check needs a secure (HTTPS) connection and a current browser.";
    return;
  }
  const challenge = form.elements.challenge.value;
  const difficulty = Number(form.dataset.difficulty);
  const encoder = new TextEncoder();
  const zeroBits = (bytes) => {
    let bits = 0;
    for (const byte of bytes) {
      if (byte === 0) { bits += 8; continue; }
      return bits + Math.clz32(byte) - 24;
    }
    return bits;
  };
  const batch = 512;
  for (let start = 0; ; start += batch) {
    const pending = [];
    for (let counter = start; counter < start + batch; counter++) {
      pending.push(crypto.subtle.digest("SHA-256", encoder.encode(challenge + ":" + counter)));
    }
    const hashes = await Promise.all(pending);
    for (let i = 0; i < hashes.length; i++) {
      if (zeroBits(new Uint8Array(hashes[i])) >= difficulty) {
        form.elements.solution.value = String(start + i);
        status.textContent = "Done. Taking you back.";
        form.submit();
        return;
      }
    }
  }
})();
`;
