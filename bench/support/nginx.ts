/**
 * nginx for the benchmarks: one process (`master_process off`, so that its CPU time is one
 * process's), its temporary files and logs in a directory of its own, no access log.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { freePort, type Server, startServer } from "./processes.js";

/**
 * Starts nginx with `http` as the body of its `http` block, where `listen 80;` stands for the
 * free loopback port it is given.
 */
export async function startNginx(dir: string, http: string): Promise<Server> {
  const port = await freePort();
  const temp = ["client_body", "proxy", "fastcgi", "uwsgi", "scgi"];
  for (const kind of [...temp, "logs"]) mkdirSync(join(dir, kind), { recursive: true });
  const config = `daemon off;
master_process off;
pid ${dir}/nginx.pid;
error_log ${dir}/logs/error.log warn;
events { worker_connections 1024; }
http {
  access_log off;
${temp.map((kind) => `  ${kind}_temp_path ${dir}/${kind};`).join("\n")}
${http.replaceAll("listen 80;", `listen 127.0.0.1:${port};`)}
}
`;
  writeFileSync(join(dir, "nginx.conf"), config);
  const argv = ["/usr/sbin/nginx", "-p", dir, "-c", join(dir, "nginx.conf")];
  return startServer(port, [...argv, "-e", `${dir}/logs/error.log`]);
}

/**
 * nginx's own limiting, in front of `upstreamPort`: `limit_req` per client address (from
 * X-Forwarded-For, as the benchmarks send it), the shape of the example policy's anonymous
 * global rule: 60 a minute with a burst of 60.
 */
export function limitReqHttp(upstreamPort: number): string {
  return `  limit_req_zone $http_x_forwarded_for zone=perclient:64m rate=60r/m;
  upstream origin { server 127.0.0.1:${upstreamPort}; keepalive 64; }
  server {
    listen 80;
    location / {
      limit_req zone=perclient burst=60 nodelay;
      limit_req_status 429;
      proxy_pass http://origin;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
    }
  }`;
}
