/**
 * examples/nextjs/middleware.ts, bundled the way Next's edge runtime bundles middleware
 * (esbuild, browser platform, the `edge-light` export condition, no Node built-ins) and run in
 * workerd, in seconds: `next/server` is a stand-in that does what Next's `NextResponse.next()`
 * does (a pass-through response carrying the headers to add). The same file in a real Next.js
 * app, built and started, is test/nextjs/next-app.test.ts.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import type { Plugin } from "esbuild";
import { afterAll, describe, expect, it } from "vitest";
import { bundleForEdge, runInWorkerd } from "../support/edge-bundle.js";
import { withinOneWindow } from "../support/windows.js";

const dir = mkdtempSync(join(tmpdir(), "edgelimit-next-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const NEXT_SERVER = `
export class NextResponse extends Response {
  static next(init = {}) {
    const headers = new Headers(init.headers);
    headers.set("x-middleware-next", "1");
    return new NextResponse(null, { headers });
  }
}
`;

/** Resolves the example's imports: `edgelimit` to the built package, `next/server` to the stand-in. */
function resolveImports(): Plugin {
  const dist = resolve("dist");
  return {
    name: "example-imports",
    setup(plugins) {
      const files: Record<string, string> = {
        edgelimit: "index.js",
        "edgelimit/fetch": "adapters/fetch.js",
        "edgelimit/redis-rest": "stores/redis-rest.js",
      };
      plugins.onResolve({ filter: /^edgelimit(\/fetch|\/redis-rest)?$/ }, (args) => ({
        path: join(dist, files[args.path] as string),
      }));
      plugins.onResolve({ filter: /^next\/server$/ }, () => ({
        path: join(dir, "next-server.mjs"),
      }));
    },
  };
}

describe("the Next.js middleware example", () => {
  it("limits an API route when bundled for Next's edge runtime", async () => {
    writeFileSync(join(dir, "next-server.mjs"), NEXT_SERVER);
    // A worker that calls the middleware as Next would, and answers for the API route.
    writeFileSync(
      join(dir, "worker.mjs"),
      `import { middleware, config } from ${JSON.stringify(resolve("examples/nextjs/middleware.ts"))};
export default {
  async fetch(request) {
    if (!config.matcher.startsWith("/api/")) throw new Error("unexpected matcher");
    const answer = await middleware(request);
    if (answer.headers.get("x-middleware-next") !== "1") return answer;
    const route = new Response("api route", { headers: answer.headers });
    route.headers.delete("x-middleware-next");
    return route;
  },
};`,
    );
    const { outfile, nodeBuiltins } = await bundleForEdge(join(dir, "worker.mjs"), dir, {
      conditions: ["edge-light"],
      plugins: [resolveImports()],
      // Behind a proxy that sets x-real-ip (the example's README); the memory store.
      define: { "process.env": JSON.stringify({ EDGELIMIT_CLIENT_IP_HEADER: "x-real-ip" }) },
    });
    expect(nodeBuiltins).toEqual([]);
    const miniflare = await runInWorkerd(outfile, dir);
    try {
      // The example's minute windows on workerd's real clock: the six requests in one minute.
      await withinOneWindow(60_000, 5_000);
      const statuses: number[] = [];
      let first: Response | undefined;
      for (let i = 0; i < 6; i++) {
        const response = await miniflare.dispatchFetch("https://app.test/api/login", {
          method: "POST",
          headers: { "x-real-ip": "203.0.113.50" },
        });
        const body = await response.text();
        if (i === 0) {
          expect(body).toBe("api route");
          first = response as unknown as Response;
        }
        statuses.push(response.status);
      }
      expect(statuses).toEqual([200, 200, 200, 200, 200, 429]);
      expect(first?.headers.get("x-ratelimit-remaining")).toBe("4");
      // Another client, identified by the header the platform sets, is counted apart.
      const other = await miniflare.dispatchFetch("https://app.test/api/login", {
        method: "POST",
        headers: { "x-real-ip": "203.0.113.51" },
      });
      expect(other.status).toBe(200);
    } finally {
      await miniflare.dispose();
    }
  });
});
