// The two jose functions the verifier uses, in a module of their own: it is loaded by the first
// request that carries a token (a cold start without one never loads jose), and the
// Lambda@Edge build makes it a file of its own in the zip.
export { importSPKI, jwtVerify } from "jose";
