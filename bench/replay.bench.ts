/**
 * `npm run bench -- replay`: `edgelimit replay` over a synthetic nginx combined log with the seed
 * policy (examples/policies/cloudfront.yaml), on one core (taskset -c 0), at 100 k, 1 M and 10 M
 * lines: lines per second and peak RSS at each size (streaming: RSS should stay flat). Beside it,
 * in the same run and over the same file, `mawk` (or `awk`) counting requests per address and
 * minute, a baseline that does strictly less work (no limiter, no report).
 *
 * REPLAY_BENCH_SIZES=100000,1000000 picks other sizes.
 */
import { spawnSync } from "node:child_process";
import { createWriteStream, mkdtempSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const sizes = (process.env.REPLAY_BENCH_SIZES ?? "100000,1000000,10000000").split(",").map(Number);
const dir = mkdtempSync(join(tmpdir(), "edgelimit-replay-bench-"));
const MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
const PATHS = [
  "/",
  "/index.html",
  "/static/app.js",
  "/api/search?q=shoes",
  "/api/reports/2024",
  "/api/export",
  "/api/items/42",
];
const AGENTS = [
  "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 Chrome/124.0",
  "curl/8.5.0",
  "python-requests/2.31",
];

function pad(value: number): string {
  return value < 10 ? `0${value}` : String(value);
}

/**
 * `lines` requests over one day from 50,000 addresses (a tenth of them IPv6), a few of them
 * heavy hitters, in time order: a deterministic generator, so every run replays the same file.
 */
async function generate(lines: number): Promise<string> {
  const path = join(dir, `combined-${lines}.log`);
  const out = createWriteStream(path);
  const start = Date.UTC(2024, 4, 1);
  let seed = 42;
  const random = () => {
    seed = (seed * 1103515245 + 12345) & 0x7fffffff;
    return seed / 0x7fffffff;
  };
  let chunk = "";
  for (let i = 0; i < lines; i++) {
    const time = new Date(start + Math.floor((i / lines) * 86_400_000));
    const heavy = random() < 0.05;
    const client = heavy ? Math.floor(random() * 20) : Math.floor(random() * 50_000);
    const ip =
      client % 10 === 9
        ? `2001:db8:${client.toString(16)}::1`
        : `10.${client >> 16}.${(client >> 8) & 255}.${client & 255}`;
    const stamp = `${pad(time.getUTCDate())}/${MONTHS[time.getUTCMonth()]}/${time.getUTCFullYear()}:${pad(time.getUTCHours())}:${pad(time.getUTCMinutes())}:${pad(time.getUTCSeconds())} +0000`;
    const path = PATHS[Math.floor(random() * PATHS.length)];
    const agent = AGENTS[client % AGENTS.length];
    chunk += `${ip} - - [${stamp}] "GET ${path} HTTP/1.1" 200 512 "-" "${agent}"\n`;
    if (chunk.length > 1 << 20) {
      if (!out.write(chunk))
        await new Promise<void>((resolve) => out.once("drain", () => resolve()));
      chunk = "";
    }
  }
  out.end(chunk);
  await new Promise<void>((resolve) => out.once("finish", () => resolve()));
  return path;
}

function oneCore(command: string[]): string[] {
  const taskset = spawnSync("taskset", ["-c", "0", "true"]);
  return taskset.status === 0 ? ["taskset", "-c", "0", ...command] : command;
}

/** Runs the built CLI under GNU time for its peak RSS; wall time measured here. */
function runReplay(file: string): { seconds: number; rssMb: number; requests: number } {
  const command = oneCore([
    "/usr/bin/time",
    "-f",
    "%M",
    process.execPath,
    join(root, "dist/cli/main.js"),
    "replay",
    "--no-progress",
    "--json",
    "--policy",
    join(root, "examples/policies/cloudfront.yaml"),
    file,
  ]);
  const started = process.hrtime.bigint();
  const result = spawnSync(command[0] as string, command.slice(1), {
    encoding: "utf8",
    maxBuffer: 1 << 26,
  });
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  if (result.status !== 0) throw new Error(`replay failed: ${result.stderr}`);
  const rssKb = Number(result.stderr.trim().split("\n").at(-1));
  const report = JSON.parse(result.stdout) as { requests: number };
  return { seconds, rssMb: rssKb / 1024, requests: report.requests };
}

function runAwk(file: string): { name: string; seconds: number } {
  const name = spawnSync("mawk", ["-W", "version"]).status === 0 ? "mawk" : "awk";
  const program =
    '{ split($4, t, ":"); c[$1 " " t[2] ":" t[3]]++ } END { n = 0; for (k in c) n++; print n }';
  const started = process.hrtime.bigint();
  const [command, ...args] = oneCore([name, program, file]);
  const result = spawnSync(command as string, args, { encoding: "utf8" });
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  if (result.status !== 0) throw new Error(`${name} failed: ${result.stderr}`);
  return { name, seconds };
}

const rate = (lines: number, seconds: number) =>
  Math.round(lines / seconds).toLocaleString("en-US");

try {
  console.log(
    "lines       file MB  replay s  replay lines/s  peak RSS MB  awk s  awk lines/s  replay/awk",
  );
  for (const lines of sizes) {
    const file = await generate(lines);
    const megabytes = statSync(file).size / 1_048_576;
    const replay = runReplay(file);
    if (replay.requests !== lines) throw new Error(`replayed ${replay.requests} of ${lines} lines`);
    const awk = runAwk(file);
    console.log(
      [
        lines.toLocaleString("en-US").padEnd(10),
        megabytes.toFixed(0).padStart(8),
        replay.seconds.toFixed(2).padStart(9),
        rate(lines, replay.seconds).padStart(15),
        replay.rssMb.toFixed(0).padStart(12),
        awk.seconds.toFixed(2).padStart(6),
        rate(lines, awk.seconds).padStart(12),
        `${(awk.seconds / replay.seconds).toFixed(2)}x (${awk.name})`.padStart(11),
      ].join(" "),
    );
    rmSync(file);
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}
