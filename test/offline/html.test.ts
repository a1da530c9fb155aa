/**
 * Text from a log or a client (a path, a user agent, a token's subject) written into the
 * project's HTML pages: the reports of replay and simulate (offline/html.ts) and the challenge
 * page (challenge/page.ts) escape it the same way, every character HTML gives a meaning to.
 */
import { describe, expect, it } from "vitest";
import { renderPage } from "../../src/challenge/page.js";
import { htmlTable, reportPage } from "../../src/offline/html.js";

const HOSTILE = `/a?b=1&c=<script>"x"</script>' onmouseover='alert(1)`;
const ESCAPED =
  "/a?b=1&amp;c=&lt;script&gt;&quot;x&quot;&lt;/script&gt;&#39; onmouseover=&#39;alert(1)";

describe("text written into HTML", () => {
  it("is escaped in a report's tables and title, single quotes included", () => {
    expect(htmlTable("paths", ["path"], [[HOSTILE]])).toContain(`<td>${ESCAPED}</td>`);
    const page = reportPage({ title: HOSTILE, body: "", charts: [] }, undefined);
    expect(page).toContain(`<title>${ESCAPED}</title>`);
  });

  it("is escaped the same way on the challenge page", () => {
    const page = renderPage({
      verifyPath: "/.edgelimit/verify",
      redirect: HOSTILE,
      failed: false,
      scriptNonce: "n0nce",
    });
    expect(page).toContain(`value="${ESCAPED}"`);
    expect(page).not.toContain(HOSTILE);
  });
});
