/**
 * The help text of every command, in one module that imports nothing, so that `edgelimit
 * --help` can list every option of every command without loading them, and a command's own
 * `--help` says the same thing.
 */

export const CHECK_USAGE = `Usage: edgelimit check FILE [options]

Validates a policy and prints the rules it resolves to. Exits 1 when the policy has errors.
Warns, with the line, about traffic that no rule counts (unlimited, and never failing closed)
and about prefixes that overlap.

  --json                 print the resolved policy as JSON; on errors, print
                         {"ok":false,"file","code","issues":[{code,path,line,column,message}]}
  --target NAME          any (default) | cloudflare: also check that platform's own limits
  --strict               warnings (traffic no rule counts, overlapping prefixes) are errors
  -h, --help             this text
`;

export const SERVE_USAGE = `Usage: edgelimit serve --policy FILE --upstream URL [options]

Runs the gateway in front of an origin until SIGTERM or SIGINT, then drains.

  --policy FILE          policy (YAML or JSON); reloaded on SIGHUP and when the file changes
  --upstream URL         origin to forward allowed requests to (optional with --demo)
  --port N               public port (default 8080)
  --host ADDR            public address (default 0.0.0.0; with --demo, 127.0.0.1)
  --admin-port N         admin port: dashboard, /metrics, /healthz (default 9090; never the public port)
  --admin-host ADDR      admin address (default 127.0.0.1; a warning when it is not loopback:
                         the admin listener has no authentication)
  --store URL            memory | redis://HOST:PORT | redis+cluster://H:P,H:P |
                         redis+https://:TOKEN@HOST (Redis over HTTP; the token may come
                         from EDGELIMIT_REDIS_REST_TOKEN instead) |
                         dynamodb://TABLE?region=R&endpoint=URL (default memory)
  --demo                 start a built-in demo origin (and session JWT and challenge secrets if unset)
  --no-limit             forward everything without limiting (a baseline for benchmarks)
  --log-sample RATE      share of allowed decisions logged (default 0.01; refusals always)
  --upstream-timeout MS  wait for upstream response headers, then 504 (default 30000)
  --drain-timeout MS     on SIGTERM, wait this long for in-flight requests (default 10000)
  -h, --help             this text
`;

export const RLS_USAGE = `Usage: edgelimit rls [--config PATH] [--policy FILE] [options]

A decision-only rate limit service, a drop-in for envoyproxy/ratelimit: Envoy's gRPC
ShouldRateLimit and grpc.health.v1, POST /json and GET /healthcheck, and forward-auth at
/check/nginx, /check/caddy, /check/traefik and /check/haproxy, each reading only the headers
that proxy sets (docs/proxies.md, docs/forward-auth.md).
Runs until SIGTERM or SIGINT, then drains.

  --config PATH          envoyproxy/ratelimit's YAML configuration: a file or a directory of
                         them (default: RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/RUNTIME_APPDIRECTORY);
                         reloaded on change and on SIGHUP, counters kept
  --policy FILE          an edgelimit policy, for /check/PROXY and for the gRPC domains the
                         configuration does not name; reloaded as --config is
  --store URL            memory | redis://HOST:PORT | redis+cluster://H:P,H:P |
                         dynamodb://TABLE?region=R&endpoint=URL (default: REDIS_URL, else memory)
  --grpc-port N          gRPC port (default GRPC_PORT, else 8081; 0 picks a free port)
  --http-port N          HTTP port (default PORT, else 8080)
  --admin-port N         admin port on 127.0.0.1: dashboard, /metrics, /healthz (default 9090)
  --host ADDR            address of the gRPC and HTTP listeners (default HOST / GRPC_HOST, else 0.0.0.0)
  --max-descriptor-bytes N
                         most bytes of one descriptor's keys and values (default 65536, above
                         Envoy's default header limit; raise it with max_request_headers_kb)
  -h, --help             this text
`;

export const BUILD_USAGE = `Usage: edgelimit build lambda-edge --policy FILE --store URL --out DIR [options]

Bundles the policy and store settings into the two Lambda@Edge zips (viewer request and
origin response). The policy's { env: NAME } secrets are read now and baked into the bundle.

  --policy FILE          policy (YAML or JSON)
  --store URL            dynamodb://TABLE?region=R[&endpoint=URL][&regions=R1,R2]
  --out DIR              where to write the zips
  --no-minify            keep the bundle readable
  --overrides            read operators' overrides (edgelimit override) at the edge; the
                         default for a policy with an overrides: section
  --no-overrides         read none, whatever the policy says
  -h, --help             this text
`;

/** The replay command adds the list of log formats after the `--format` line. */
export const REPLAY_FORMAT_LINE =
  "  --format NAME            the log format (default: detected from the first lines)\n";

export const REPLAY_USAGE = `Usage: edgelimit replay --policy FILE [options] LOG...

Runs a policy over access logs with the logs' own time, through the real limiter and memory
store, and reports who would have been challenged or blocked and which limits fit the traffic.
LOG is a file, a pattern ("logs/*.gz", "**/E2ABC*.gz") or - for stdin; gzip is read whatever
the name. Several logs are merged by time.

Options:
  --policy FILE            the policy to replay (required)
  --compare FILE           a second policy, replayed over the same traffic, side by side
  --overrides FILE         operators' overrides in force over the log (YAML or JSON, a list of
                           what edgelimit override set takes; docs/overrides.md)
${REPLAY_FORMAT_LINE}  --field NAME=PATH        json: where a field is (ip, time, method, path, query, userAgent,
                           status), dotted for nested objects; repeat for each
  --user-field NAME        the log's field holding a verified user id (a CloudFront column, a
                           JSON path, remote_user for combined/common); without it every
                           request is anonymous
  --plan-field NAME        the log's field holding the user's plan
  --reorder DURATION       how far out of order lines may come and still be put in place
                           (default 1m); later lines are counted as late
  --refuse-at-most SHARE   the share of subjects a suggested limit may refuse (default 0.1%)
  --tighten                let a suggested limit refuse subjects the current limit admits
  --top N                  refused subjects to list (default 10)
  --max-errors N           stop after more than N malformed lines (default: never)
  --json                   print one JSON object instead of the text report
  --html FILE              also write a self-contained page with charts and tables
  --no-progress            no progress line on stderr (shown only when stderr is a terminal)
  -h, --help               this text

The policy's secrets are never read: replay holds no tokens. The client address is the one the
log recorded for the connection; forwarded headers in a log are not believed.
`;

export const SIMULATE_USAGE = `Usage: edgelimit simulate SCENARIO.yaml [options]

A deterministic multi-region simulation of accuracy, store operations and cost per counting
mode (two-writes, exact, hybrid, hybrid+holder, hybrid+allowance), driving the real decision engine and stores on virtual time over
modeled networks, replicas and instances (see docs/accuracy.md; examples/scenarios/).

  --json                 print one JSON object instead of the text table
  --html FILE            also write a self-contained page with charts
  --seed N               the random seed (default: the scenario's); same seed, same output
  --modes A,B            the modes to run instead of the scenario's (hybrid+holder: hybrid
                         counting with region holders, the DynamoDB store's opt-in regionHolder;
                         hybrid+allowance: with the regions' allowances too, regionAllowance)
  --overrides FILE       operators' overrides in force from the start, on every instance (YAML
                         or JSON, a list of what edgelimit override set takes; docs/overrides.md)
  --no-progress          no progress line on stderr (shown only when stderr is a terminal)
  -h, --help             this text
`;

export const OVERRIDE_USAGE = `Usage: edgelimit override set|list|remove [SUBJECT] --store URL [options]

Operators' overrides in the store every instance reads (docs/overrides.md): for one subject
(user:ID, key:KEY, ip:ADDRESS or ip:RANGE), a limit, block or allow, on one rule, a plan's
rules or all rules. Each instance applies a change within its refresh (default 5 s).
Every change is logged with its time and note.

  set SUBJECT            store an override (replaces the one of its subject and scope)
  list                   print the overrides in force
  remove SUBJECT         remove the override of the subject and scope
  --store URL            redis://HOST:PORT | redis+cluster://H:P,H:P | redis+https://HOST |
                         dynamodb://TABLE?region=R (the limiters' store), or a Worker's
                         override route: cloudflare+https://HOST/PATH (token in
                         EDGELIMIT_ADMIN_TOKEN)
  --policy FILE          the policy the limiters run (set: its rules and overrides bounds;
                         optional with a Worker, which checks against its own)
  --rule ID              one rule (default: all rules)
  --plan NAME            the rules of one plan
  --limit N              set: this limit instead of the rule's (same window, same count)
  --block                set: always refuse (403)
  --reason TEXT          set --block: why (kept for operators, never sent to clients)
  --allow                set: never count or limit
  --until TIME           set: when it ends: ISO 8601, epoch milliseconds, or from now (2h, 3d)
  --note TEXT            who and why, kept with the override and in the change log
  --log N                list: also print the last N changes
  --json                 print JSON
  -h, --help             this text
`;

export const ENVIRONMENT = `Environment:
  { env: NAME } secrets  a policy's secrets (identity.user.jwt.secret, challenge.secret, ...)
                         may name a variable, such as EDGELIMIT_JWT_SECRET or
                         EDGELIMIT_CHALLENGE_SECRET: serve reads them, build bakes them in,
                         check warns when one is unset, replay never reads them
  AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN
                         credentials for serve --store dynamodb://... and for lists in S3
  AWS_REGION             read by the Lambda@Edge bundle that build writes (Lambda sets it)
  EDGELIMIT_REDIS_REST_TOKEN
                         the token for serve --store redis+https://HOST when the URL has none
  EDGELIMIT_ADMIN_TOKEN  the bearer token for override --store cloudflare+https://HOST/PATH
                         (the Worker's secret of that name)
  RUNTIME_ROOT, RUNTIME_SUBDIRECTORY, RUNTIME_APPDIRECTORY, REDIS_URL, REDIS_TYPE,
  REDIS_AUTH, REDIS_TLS, PORT, GRPC_PORT, HOST, GRPC_HOST, SHADOW_MODE,
  MERGE_DOMAIN_CONFIG, LIMIT_RESPONSE_HEADERS_ENABLED
                         envoyproxy/ratelimit's variables, read by rls (docs/proxies.md)
`;

export const SCHEMA_USAGE = `Usage: edgelimit schema

Prints the policy's JSON Schema (also shipped as edgelimit/policy.schema.json). Point an
editor at it with a first line such as
  # yaml-language-server: $schema=./node_modules/edgelimit/dist/policy.schema.json
or a "$schema" key in a JSON policy. \`edgelimit check\` still checks what a schema cannot say.

  -h, --help             this text
`;

export const COMMAND_USAGES = {
  check: CHECK_USAGE,
  serve: SERVE_USAGE,
  rls: RLS_USAGE,
  build: BUILD_USAGE,
  replay: REPLAY_USAGE,
  simulate: SIMULATE_USAGE,
  schema: SCHEMA_USAGE,
  override: OVERRIDE_USAGE,
} as const;

export function topLevelUsage(): string {
  return `Usage: edgelimit COMMAND [options]   (edgelimit COMMAND --help for one command)
       edgelimit --version | --help

${Object.values(COMMAND_USAGES).join("\n")}
${ENVIRONMENT}`;
}
