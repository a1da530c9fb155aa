import { execFileSync } from "node:child_process";
import { once } from "node:events";
import { readFileSync } from "node:fs";
import { type AddressInfo, connect } from "node:net";
import { join } from "node:path";
import { createServer as createTlsServer } from "node:tls";

/**
 * A self-signed EC certificate for `subjectAltName` (`DNS:localhost`, `IP:127.0.0.1`), made
 * with the openssl CLI in `directory` (cert.pem, key.pem), valid for a day.
 */
export function selfSignedCertificate(
  directory: string,
  subjectAltName: string,
): { key: string; cert: string; certFile: string } {
  const key = join(directory, "key.pem");
  const cert = join(directory, "cert.pem");
  const commonName = subjectAltName.slice(subjectAltName.indexOf(":") + 1);
  execFileSync(
    "openssl",
    [
      "req",
      "-x509",
      ...["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"],
      ...["-subj", `/CN=${commonName}`, "-addext", `subjectAltName=${subjectAltName}`],
      ...["-days", "1", "-keyout", key, "-out", cert],
    ],
    { stdio: "ignore" },
  );
  return { key: readFileSync(key, "utf8"), cert: readFileSync(cert, "utf8"), certFile: cert };
}

export interface TlsTerminator {
  /** `https://127.0.0.1:port`. */
  readonly endpoint: string;
  /** The self-signed certificate, PEM, for `NODE_EXTRA_CA_CERTS` or a client's `ca`. */
  readonly caFile: string;
  close(): void;
}

/**
 * A TLS server on a free loopback port whose connections are piped to a plain TCP server on
 * `targetPort` (dynalite, say), with a certificate for `IP:127.0.0.1` made in `directory`:
 * an https endpoint for a server that speaks only http.
 */
export async function startTlsTerminator(
  directory: string,
  targetPort: number,
): Promise<TlsTerminator> {
  const { key, cert, certFile } = selfSignedCertificate(directory, "IP:127.0.0.1");
  const server = createTlsServer({ key, cert }, (secure) => {
    const plain = connect(targetPort, "127.0.0.1");
    // Without it, Nagle's algorithm holds an answer's second segment back until the client's
    // delayed ACK of the first, ~40 ms: bench/lambda-edge.bench.ts showed every first answer
    // over TLS (bare node:tls included) 40-50 ms late.
    secure.setNoDelay(true);
    secure.pipe(plain).pipe(secure);
    secure.on("error", () => plain.destroy());
    plain.on("error", () => secure.destroy());
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  return {
    endpoint: `https://127.0.0.1:${(server.address() as AddressInfo).port}`,
    caFile: certFile,
    close: () => server.close(),
  };
}
