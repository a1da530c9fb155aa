/**
 * Part 4 of bench/rls.bench.ts: CPU per request of the whole path at saturation (wrk, the same
 * 10,000 clients, `GET /api/search`): nginx with auth_request asking `edgelimit rls --policy`
 * (nginx and rls counted), nginx `limit_req` alone, and `edgelimit serve`; the app behind each
 * is one Node process, not counted. Needs nginx and wrk.
 */
import { execFileSync } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { median } from "./median.js";
import { limitReqHttp, startNginx } from "./nginx.js";
import { cpuSeconds, freePort, type Server, startServer } from "./processes.js";
import { PATH, POPULATION } from "./rls-calls.js";

const CONNECTIONS = 32;
const POLICY = "examples/policies/cloudfront.yaml";

async function startUpstream(): Promise<Server> {
  const port = await freePort();
  const source = `require("node:http").createServer((req, res) => { res.writeHead(200, { "content-type": "application/json" }); res.end('{"ok":true}'); }).listen(${port}, "127.0.0.1")`;
  return startServer(port, [process.execPath, "-e", source]);
}

/** The http block of examples/rls/nginx.conf, pointed at this bench's app and rls. */
function authRequestHttpBlock(app: Server, rlsHttpPort: number): string {
  const example = readFileSync("examples/rls/nginx.conf", "utf8");
  const http = example.slice(example.indexOf("http {") + "http {".length, example.lastIndexOf("}"));
  return http
    .replaceAll("127.0.0.1:3000", `127.0.0.1:${app.port}`)
    .replaceAll("127.0.0.1:8080", `127.0.0.1:${rlsHttpPort}`);
}

const WRK_SCRIPT = `local n = 0
request = function()
  n = n + 1
  local i = n % ${POPULATION}
  local ip = "10.9." .. math.floor(i / 250) .. "." .. (i % 250 + 1)
  return wrk.format("GET", "${PATH}?q=shoes", { ["X-Forwarded-For"] = ip })
end`;

/** wrk at saturation; the CPU of `serving` per completed request, in µs. */
function wrk(
  dir: string,
  port: number,
  serving: readonly Server[],
  seconds: number,
): { cpuMicros: number; rps: number; refused: number } {
  const script = join(dir, "returning.lua");
  writeFileSync(script, WRK_SCRIPT);
  const cpu = () => serving.reduce((sum, server) => sum + cpuSeconds(server.pid), 0);
  const before = cpu();
  const output = execFileSync(
    "wrk",
    // wrk takes whole seconds only (it refuses "1.5s").
    [
      "-t1",
      `-c${CONNECTIONS}`,
      `-d${Math.max(1, Math.round(seconds))}s`,
      "-s",
      script,
      `http://127.0.0.1:${port}`,
    ],
    { encoding: "utf8" },
  );
  const used = cpu() - before;
  const requests = Number(/(\d+) requests in/.exec(output)?.[1]);
  return {
    cpuMicros: (used / requests) * 1e6,
    rps: Number(/Requests\/sec:\s+([\d.]+)/.exec(output)?.[1]),
    refused: Number(/Non-2xx or 3xx responses:\s+(\d+)/.exec(output)?.[1] ?? 0) / requests,
  };
}

export function hasWrk(): boolean {
  try {
    execFileSync("wrk", ["--version"], { stdio: "ignore" });
    return true;
  } catch (error) {
    // wrk --version exits 1 after printing its version; only a missing binary is ENOENT.
    return (error as { code?: string }).code !== "ENOENT";
  }
}

export async function pathPart(
  dir: string,
  options: {
    readonly rounds: number;
    readonly seconds: number;
    readonly env: NodeJS.ProcessEnv;
    readonly out: (line: string) => void;
  },
): Promise<void> {
  const { rounds, seconds, env, out } = options;
  const app = await startUpstream();
  const policyRlsHttp = await freePort();
  const policyRls = await startServer(
    policyRlsHttp,
    [
      process.execPath,
      "dist/cli/main.js",
      "rls",
      "--policy",
      POLICY,
      "--http-port",
      String(policyRlsHttp),
      "--grpc-port",
      String(await freePort()),
      "--admin-port",
      String(await freePort()),
      "--host",
      "127.0.0.1",
    ],
    env,
  );
  const authRequest = await startNginx(
    join(dir, "auth-request"),
    authRequestHttpBlock(app, policyRlsHttp),
  );
  const limitReq = await startNginx(join(dir, "limit-req"), limitReqHttp(app.port));
  const servePort = await freePort();
  const serve = await startServer(
    servePort,
    [
      process.execPath,
      "dist/cli/main.js",
      "serve",
      "--policy",
      POLICY,
      "--upstream",
      `http://127.0.0.1:${app.port}`,
      "--host",
      "127.0.0.1",
      "--port",
      String(servePort),
      "--admin-port",
      String(await freePort()),
      "--log-sample",
      "0",
    ],
    env,
  );
  const paths = [
    {
      name: "nginx + auth_request + rls",
      port: authRequest.port,
      serving: [authRequest, policyRls],
    },
    { name: "nginx limit_req", port: limitReq.port, serving: [limitReq] },
    { name: "edgelimit serve", port: serve.port, serving: [serve] },
  ];
  for (const path of paths) wrk(dir, path.port, path.serving, 1); // warm-up
  const byPath = new Map<string, ReturnType<typeof wrk>[]>();
  for (let round = 0; round < rounds; round++) {
    for (const path of round % 2 === 0 ? paths : [...paths].reverse()) {
      const runs = byPath.get(path.name) ?? [];
      runs.push(wrk(dir, path.port, path.serving, seconds));
      byPath.set(path.name, runs);
    }
  }
  out(
    `4. CPU per request of the whole path (every serving process, not the app), wrk -c${CONNECTIONS}, 10,000 returning clients, medians of ${rounds} rounds:`,
  );
  const cpuOf = (name: string) => median((byPath.get(name) ?? []).map((run) => run.cpuMicros));
  for (const path of paths) {
    const runs = byPath.get(path.name) ?? [];
    out(
      `   ${path.name.padEnd(27)} ${cpuOf(path.name).toFixed(1).padStart(6)} µs/req  ${median(
        runs.map((run) => run.rps),
      )
        .toFixed(0)
        .padStart(
          6,
        )} req/s  refused ${median(runs.map((run) => run.refused)).toFixed(3)}  (µs/req by round: ${runs.map((run) => run.cpuMicros.toFixed(1)).join(", ")})`,
    );
  }
  const nginxRls = cpuOf("nginx + auth_request + rls");
  out(
    `   nginx + auth_request + rls: ${(nginxRls / cpuOf("nginx limit_req")).toFixed(2)}x nginx limit_req's CPU per request, ${(nginxRls / cpuOf("edgelimit serve")).toFixed(2)}x edgelimit serve's`,
  );
}
