import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";

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
