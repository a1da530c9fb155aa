# Shared by the gateway scripts (sourced, with $work set to a fresh directory): processes to stop
# on exit, a free loopback port, the upstream (start_upstream: the 27-byte JSON answer of
# bench/gateway.bench.ts on $upstream_port) and the returning-clients wrk script
# ($work/returning.lua, 10,000 clients cycling, as bench/gateway.bench.ts).
pids=()
cleanup() { for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT
free_port() { node -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})'; }
start_upstream() {
  upstream_port=$(free_port)
  node -e "require('node:http').createServer((q, r) => { r.writeHead(200, { 'content-type': 'application/json' }); r.end('{\"ok\":true,\"items\":[1,2,3]}'); }).listen($upstream_port, '127.0.0.1')" &
  pids+=($!)
  # The example policy names a JWT and a challenge secret; the bench's traffic uses neither.
  export EDGELIMIT_JWT_SECRET=bench-secret-not-used-by-anonymous-traffic
  export EDGELIMIT_CHALLENGE_SECRET=bench-challenge-secret-not-used
}
cat > "$work/returning.lua" <<'LUA'
local n = 0
request = function()
  n = n + 1
  local i = n % 10000
  local ip = "10.9." .. math.floor(i / 250) .. "." .. (i % 250 + 1)
  return wrk.format("GET", "/api/search?q=shoes", { ["X-Forwarded-For"] = ip })
end
LUA
