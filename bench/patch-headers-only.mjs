// Turns a copy of the built gateway into the "headers-only" gateway of the benchmarks: its
// `--no-limit` path adds the headers that the limited gateway adds for the bench's traffic (the
// five rate-limit headers to the client, the remaining count to the origin), with values of the
// same length that vary per request, and asks no limiter. What Node and undici charge for the
// headers, without a decision.
//
//   node bench/patch-headers-only.mjs <copy-of-dist>      (edits <copy>/gateway/server.js)
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";

const build = process.argv[2];
if (build === undefined) {
  console.error("usage: patch-headers-only.mjs <copy-of-dist>");
  process.exit(2);
}
const path = join(build, "gateway", "server.js");
const source = readFileSync(path, "utf8");
const line =
  "await this.#proxy.forward(req, res, NO_HEADERS, NO_HEADERS, this.#onUpstreamFailure);";
if (!source.includes(line)) {
  console.error(`patch-headers-only: cannot find the --no-limit forward in ${path}`);
  process.exit(1);
}
const headers = `const n = this.#inFlight & 7;
const client = { "x-ratelimit-limit": "30", "x-ratelimit-remaining": String(20 + n), "x-ratelimit-reset": String(1796055180 + n), "ratelimit-policy": '"anonymous.global";q=60;w=60, "anonymous.path./api/search";q=30;w=60', ratelimit: \`"anonymous.path./api/search";r=\${20 + n};t=\${23 + n}\` };
await this.#proxy.forward(req, res, { "x-ratelimit-remaining": String(20 + n) }, client, this.#onUpstreamFailure);`;
writeFileSync(path, source.replace(line, headers));
