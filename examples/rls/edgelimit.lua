-- An HAProxy action that asks edgelimit rls (HTTP, /check) about the request it is holding,
-- with HAProxy's own HTTP client (2.5 and later), and leaves the answer in variables for
-- haproxy.cfg to act on. Tested by test/rls/proxies.test.ts; explained in docs/forward-auth.md.
local check_url = os.getenv("EDGELIMIT_CHECK_URL") or "http://127.0.0.1:8080/check/haproxy"

-- /check/haproxy reads the request from x-forwarded-method, x-forwarded-uri and
-- x-forwarded-for, which are built below from what HAProxy saw; of the client's own headers
-- only these are sent.
local forwarded = { "authorization", "cookie" }
-- The answer's headers, kept as txn.el_<name with - as _>.
local answered = {
  "x-edgelimit-action", "retry-after", "location", "content-type", "cache-control",
  "x-ratelimit-limit", "x-ratelimit-remaining", "x-ratelimit-reset", "ratelimit", "ratelimit-policy",
}

local function first(values)
  if values == nil then return nil end
  return values[0] or values[1]
end

core.register_action("edgelimit", { "http-req" }, function(txn)
  local request = txn.http:req_get_headers()
  local client = txn.sf:src()
  local chain = first(request["x-forwarded-for"])
  local headers = {
    ["x-forwarded-method"] = { txn.sf:method() },
    ["x-forwarded-uri"] = { txn.sf:pathq() },
    ["x-forwarded-for"] = { chain and (chain .. ", " .. client) or client },
  }
  for _, name in ipairs(forwarded) do
    local value = first(request[name])
    if value ~= nil then headers[name] = { value } end
  end
  local response = core.httpclient():get{ url = check_url, headers = headers, timeout = 1000 }
  if response == nil or response.status == nil or response.status == 0 then
    -- edgelimit rls did not answer: let the request through (change to 503 to fail closed).
    txn:set_var("txn.el_status", 200)
    return
  end
  if response.status ~= 200 and response.status ~= 302 and response.status ~= 429
      and response.status ~= 503 then
    -- Not a decision (rls asked at the wrong path, or started without --policy): an error,
    -- never a pass. The answer's text says what to fix.
    core.Warning("edgelimit: " .. check_url .. " answered " .. response.status .. ": "
      .. (response.body or ""))
    txn:set_var("txn.el_status", 500)
    return
  end
  txn:set_var("txn.el_status", response.status)
  txn:set_var("txn.el_body", response.body or "")
  for _, name in ipairs(answered) do
    local value = first(response.headers[name])
    if value ~= nil then txn:set_var("txn.el_" .. name:gsub("-", "_"), value) end
  end
end, 0)
