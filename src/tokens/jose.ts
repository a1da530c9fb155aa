// The two jose functions the verifier uses, in a module of their own: it is loaded by the first
// request that carries a token (a cold start without one never loads jose), and the
// Lambda@Edge build makes it a file of its own in the zip. They come from jose's subpaths, not
// its index: the index also holds JWE, whose deflate uses a compression stream API that Next.js
// flags in its Edge Runtime even when nothing calls it (test/adapters/edge-bundle.test.ts).

export { jwtVerify } from "jose/jwt/verify";
export { importSPKI } from "jose/key/import";
