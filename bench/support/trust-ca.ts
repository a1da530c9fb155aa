/**
 * Probe code that makes every TLS client in the process trust the test CA (and only it), with
 * verification on: each secure context Node makes gets the CA as its `ca` option. Not
 * NODE_EXTRA_CA_CERTS: with it, Node 20 builds its certificate store while it boots, before the
 * probe's clock starts, which takes ~15 ms out of the first TLS connection (measured on the
 * bench machine: boot 16 -> 30 ms, first handshake 20 -> 5 ms). A Lambda@Edge function has no
 * environment variables, so in production that cost falls in the first answer, as it does here.
 * The CA is read and node:tls loaded (~1 ms) before the clock starts.
 */
export function trustCa(caFile: string): string {
  return `
    const tls = require("node:tls");
    const createSecureContext = tls.createSecureContext;
    const ca = require("node:fs").readFileSync(${JSON.stringify(caFile)}, "utf8");
    tls.createSecureContext = (options = {}) => createSecureContext({ ...options, ca: options.ca ?? ca });`;
}
