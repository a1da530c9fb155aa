/**
 * The Lua of the two Redis store versions before the current one, verbatim from git, so that
 * test/redis/upgrade.test.ts can write counters as processes of those versions do (a store
 * upgraded in place, or a rolling upgrade with both versions live).
 *
 * Calling convention of both: `EVALSHA <sha> <keys> key... <requests> (<now> <n> spec...)...`,
 * each spec five arguments: algorithm (`f`, `s`, `t`), limit, window (ms or `m<months>`), cost,
 * mode (`e`, `o`).
 */

/** Commit f9fec34: windowed states as "index count previous span", expiry as PX. */
export const SPAN_TEXT_LUA = `
-- Locals, not globals: a global lookup is a table access on every use.
local floor, ceil, max, huge = math.floor, math.ceil, math.max, math.huge
local format, match, byte, sub = string.format, string.match, string.byte, string.sub
local call, tonumber = redis.call, tonumber
local DAY_MS = 86400000
local EPSILON = 1e-6

local function days_from_civil(y, m, d)
  if m <= 2 then y = y - 1 end
  local era = floor(y / 400)
  local yoe = y - era * 400
  local mp = m > 2 and m - 3 or m + 9
  local doy = floor((153 * mp + 2) / 5) + d - 1
  local doe = yoe * 365 + floor(yoe / 4) - floor(yoe / 100) + doy
  return era * 146097 + doe - 719468
end

local function months_since_epoch(ms)
  local z = floor(ms / DAY_MS) + 719468
  local era = floor(z / 146097)
  local doe = z - era * 146097
  local yoe = floor((doe - floor(doe / 1460) + floor(doe / 36524) - floor(doe / 146096)) / 365)
  local doy = doe - (365 * yoe + floor(yoe / 4) - floor(yoe / 100))
  local mp = floor((5 * doy + 2) / 153)
  local m = mp < 10 and mp + 3 or mp - 9
  local y = yoe + era * 400
  if m <= 2 then y = y + 1 end
  return (y - 1970) * 12 + (m - 1)
end

local function month_start(months)
  return days_from_civil(1970 + floor(months / 12), months % 12 + 1, 1) * DAY_MS
end

-- Bounds of the window with this index, stored on the spec: index, start, finish.
local function place(spec, index)
  if spec.ms then
    spec.index, spec.start, spec.finish = index, index * spec.ms, (index + 1) * spec.ms
  else
    spec.index = index
    spec.start = month_start(index * spec.months)
    spec.finish = month_start((index + 1) * spec.months)
  end
end

-- The window containing now, and now itself (what the spec is counted at).
local function locate(spec, now)
  if spec.ms then place(spec, floor(now / spec.ms))
  else place(spec, floor(months_since_epoch(now) / spec.months)) end
  spec.now = now
end

local function window_end_of(spec, index)
  if spec.ms then return (index + 1) * spec.ms end
  return month_start((index + 1) * spec.months)
end

-- Loads a counter's state, already rolled into the current window, onto the spec.
local function load(spec, raw)
  if spec.algorithm == "t" then
    spec.tat = raw and tonumber(raw) or false
    return
  end
  spec.count, spec.previous = 0, 0
  if not raw then return end
  local index, count, previous, span = match(raw, "^(%S+) (%S+) (%S+) ?(%S*)$")
  if index == nil then return end
  index = tonumber(index)
  -- A state of another window length belongs to another rule (a reload changed the window).
  if span == "" then
    if index > spec.index + 1 then return end
  elseif tonumber(span) ~= spec.span then
    return
  end
  if index > spec.index then
    -- Counted late: in the counter's newest window, at its start; never rewound.
    place(spec, index)
    spec.now = spec.start
  end
  if index == spec.index then
    spec.count, spec.previous = tonumber(count), tonumber(previous)
  elseif index == spec.index - 1 then
    spec.previous = tonumber(count)
  end
end

local function allows(spec, now)
  if spec.algorithm == "t" then
    local tat = spec.tat
    if not tat or tat < now then tat = now end
    local length = spec.finish - spec.start
    return tat + spec.cost * (length / spec.limit) - now <= length + EPSILON
  end
  if spec.algorithm == "s" then
    local weight = (spec.finish - now) / (spec.finish - spec.start)
    return spec.previous * weight + spec.count + spec.cost <= spec.limit
  end
  return spec.count + spec.cost <= spec.limit
end

-- Counts the request on the spec's state and returns the encoded state and its expiry.
local function count_request(spec, now, ok)
  if spec.algorithm == "t" then
    local tat = spec.tat
    if not tat or tat < now then tat = now end
    if ok then tat = tat + spec.cost * ((spec.finish - spec.start) / spec.limit) end
    spec.tat = tat
    return format("%.17g", tat), ceil(tat)
  end
  spec.count = spec.count + spec.cost
  -- Whole numbers below 10^14 print exactly with Lua's default number format (%.14g).
  local encoded = spec.index .. " " .. spec.count .. " " .. spec.previous .. " " .. spec.span
  if spec.algorithm == "s" then return encoded, window_end_of(spec, spec.index + 1) end
  return encoded, spec.finish
end

local function sliding_retry_after(count, previous, now, finish, length, spec)
  local limit, cost = spec.limit, spec.cost
  if count + cost <= limit and previous > 0 then
    local pass_at = finish - ((limit - cost - count) * length) / previous
    return max(1, ceil(pass_at - now))
  end
  local next_end = finish + length
  if limit - cost < 0 or count == 0 then return next_end - now end
  local pass_at = next_end - ((limit - cost) * length) / count
  return max(1, ceil(pass_at - now))
end

-- Appends allowed, count, remaining, resetAt, retryAfterMs.
local function describe(out, spec, now, ok)
  local n = #out
  out[n + 1] = ok and 1 or 0
  local finish, length = spec.finish, spec.finish - spec.start
  if spec.algorithm == "t" then
    local step = length / spec.limit
    local tat = spec.tat
    if not tat or tat < now then tat = now end
    local in_use = (tat - now) / step
    local retry = 0
    if not ok then
      retry = max(1, ceil(tat + spec.cost * step - length - now))
      if retry == huge then retry = -1 end
    end
    out[n + 2] = ceil(in_use - EPSILON)
    out[n + 3] = max(0, floor(spec.limit - in_use + EPSILON))
    out[n + 4] = ceil(tat)
    out[n + 5] = retry
    return
  end
  local count, previous = spec.count, spec.previous
  if spec.algorithm == "s" then
    local used = previous * ((finish - now) / length) + count
    local reset_at = now
    if count > 0 then reset_at = finish + length elseif previous > 0 then reset_at = finish end
    out[n + 2] = ceil(used - 1e-9)
    out[n + 3] = max(0, floor(spec.limit - used + 1e-9))
    out[n + 4] = reset_at
    out[n + 5] = ok and 0 or sliding_retry_after(count, previous, now, finish, length, spec)
    return
  end
  out[n + 2] = count
  out[n + 3] = max(0, spec.limit - count)
  out[n + 4] = finish
  out[n + 5] = ok and 0 or finish - now
end

local server_now
local out = {}
local key_at = 0
local at = 2
for _ = 1, tonumber(ARGV[1]) do
  local now = ARGV[at]
  if now == "" then
    if server_now == nil then
      local time = call("TIME")
      server_now = tonumber(time[1]) * 1000 + floor(tonumber(time[2]) / 1000)
    end
    now = server_now
  else
    now = tonumber(now)
  end
  local n = tonumber(ARGV[at + 1])
  at = at + 2
  local specs = {}
  local admitted = true
  for i = 1, n do
    local window = ARGV[at + 2]
    -- Every field up front: a table that grows field by field rehashes several times.
    local spec = {
      algorithm = ARGV[at],
      limit = tonumber(ARGV[at + 1]),
      cost = tonumber(ARGV[at + 3]),
      observe = ARGV[at + 4] == "o",
      ms = false, months = false, span = 0,
      index = 0, start = 0, finish = 0, now = 0,
      count = 0, previous = 0, tat = false, ok = false,
    }
    if byte(window, 1) == 109 then -- "m"
      spec.months = tonumber(sub(window, 2))
      spec.span = -spec.months
    else
      spec.ms = tonumber(window)
      spec.span = spec.ms
    end
    at = at + 5
    locate(spec, now)
    load(spec, call("GET", KEYS[key_at + i]))
    local ok = allows(spec, spec.now)
    spec.ok = ok
    if not ok and not spec.observe then admitted = false end
    specs[i] = spec
  end
  for i = 1, n do
    local spec = specs[i]
    local ok = spec.ok
    -- Refused requests count only on the enforcing counters that refused them.
    if admitted or not ok or spec.observe then
      local encoded, expiry = count_request(spec, spec.now, ok)
      local ttl = expiry - spec.now
      if ttl > 0 then
        call("SET", KEYS[key_at + i], encoded, "PX", ceil(ttl))
      else
        call("DEL", KEYS[key_at + i])
      end
    end
    describe(out, spec, spec.now, ok)
  end
  key_at = key_at + n
end
return out
`;

/** Commit 609b886: windowed states as "index count previous", expiry as PXAT. */
export const TEXT_LUA = `
-- Locals, not globals: a global lookup is a table access on every use.
local floor, ceil, max, huge = math.floor, math.ceil, math.max, math.huge
local format, match, byte, sub = string.format, string.match, string.byte, string.sub
local call, tonumber = redis.call, tonumber
local DAY_MS = 86400000
local EPSILON = 1e-6

local function days_from_civil(y, m, d)
  if m <= 2 then y = y - 1 end
  local era = floor(y / 400)
  local yoe = y - era * 400
  local mp = m > 2 and m - 3 or m + 9
  local doy = floor((153 * mp + 2) / 5) + d - 1
  local doe = yoe * 365 + floor(yoe / 4) - floor(yoe / 100) + doy
  return era * 146097 + doe - 719468
end

local function months_since_epoch(ms)
  local z = floor(ms / DAY_MS) + 719468
  local era = floor(z / 146097)
  local doe = z - era * 146097
  local yoe = floor((doe - floor(doe / 1460) + floor(doe / 36524) - floor(doe / 146096)) / 365)
  local doy = doe - (365 * yoe + floor(yoe / 4) - floor(yoe / 100))
  local mp = floor((5 * doy + 2) / 153)
  local m = mp < 10 and mp + 3 or mp - 9
  local y = yoe + era * 400
  if m <= 2 then y = y + 1 end
  return (y - 1970) * 12 + (m - 1)
end

local function month_start(months)
  return days_from_civil(1970 + floor(months / 12), months % 12 + 1, 1) * DAY_MS
end

-- Bounds of the window containing now, stored on the spec: index, start, finish.
local function locate(spec, now)
  if spec.ms then
    local index = floor(now / spec.ms)
    spec.index, spec.start, spec.finish = index, index * spec.ms, (index + 1) * spec.ms
  else
    local index = floor(months_since_epoch(now) / spec.months)
    spec.index = index
    spec.start = month_start(index * spec.months)
    spec.finish = month_start((index + 1) * spec.months)
  end
end

local function window_end_of(spec, index)
  if spec.ms then return (index + 1) * spec.ms end
  return month_start((index + 1) * spec.months)
end

-- Loads a counter's state, already rolled into the current window, onto the spec.
local function load(spec, raw)
  if spec.algorithm == "t" then
    spec.tat = raw and tonumber(raw) or false
    return
  end
  spec.count, spec.previous = 0, 0
  if not raw then return end
  local index, count, previous = match(raw, "^(%S+) (%S+) (%S+)$")
  if index == nil then return end
  index = tonumber(index)
  if index == spec.index then
    spec.count, spec.previous = tonumber(count), tonumber(previous)
  elseif index == spec.index - 1 then
    spec.previous = tonumber(count)
  end
end

local function allows(spec, now)
  if spec.algorithm == "t" then
    local tat = spec.tat
    if not tat or tat < now then tat = now end
    local length = spec.finish - spec.start
    return tat + spec.cost * (length / spec.limit) - now <= length + EPSILON
  end
  if spec.algorithm == "s" then
    local weight = (spec.finish - now) / (spec.finish - spec.start)
    return spec.previous * weight + spec.count + spec.cost <= spec.limit
  end
  return spec.count + spec.cost <= spec.limit
end

-- Counts the request on the spec's state and returns the encoded state and its expiry.
local function count_request(spec, now, ok)
  if spec.algorithm == "t" then
    local tat = spec.tat
    if not tat or tat < now then tat = now end
    if ok then tat = tat + spec.cost * ((spec.finish - spec.start) / spec.limit) end
    spec.tat = tat
    return format("%.17g", tat), ceil(tat)
  end
  spec.count = spec.count + spec.cost
  -- Integers below 2^53 print exactly with Lua's default number format.
  local encoded = spec.index .. " " .. spec.count .. " " .. spec.previous
  if spec.algorithm == "s" then return encoded, window_end_of(spec, spec.index + 1) end
  return encoded, spec.finish
end

local function sliding_retry_after(count, previous, now, finish, length, spec)
  local limit, cost = spec.limit, spec.cost
  if count + cost <= limit and previous > 0 then
    local pass_at = finish - ((limit - cost - count) * length) / previous
    return max(1, ceil(pass_at - now))
  end
  local next_end = finish + length
  if limit - cost < 0 or count == 0 then return next_end - now end
  local pass_at = next_end - ((limit - cost) * length) / count
  return max(1, ceil(pass_at - now))
end

-- Appends allowed, count, remaining, resetAt, retryAfterMs.
local function describe(out, spec, now, ok)
  local n = #out
  out[n + 1] = ok and 1 or 0
  local finish, length = spec.finish, spec.finish - spec.start
  if spec.algorithm == "t" then
    local step = length / spec.limit
    local tat = spec.tat
    if not tat or tat < now then tat = now end
    local in_use = (tat - now) / step
    local retry = 0
    if not ok then
      retry = max(1, ceil(tat + spec.cost * step - length - now))
      if retry == huge then retry = -1 end
    end
    out[n + 2] = ceil(in_use - EPSILON)
    out[n + 3] = max(0, floor(spec.limit - in_use + EPSILON))
    out[n + 4] = ceil(tat)
    out[n + 5] = retry
    return
  end
  local count, previous = spec.count, spec.previous
  if spec.algorithm == "s" then
    local used = previous * ((finish - now) / length) + count
    local reset_at = now
    if count > 0 then reset_at = finish + length elseif previous > 0 then reset_at = finish end
    out[n + 2] = ceil(used - 1e-9)
    out[n + 3] = max(0, floor(spec.limit - used + 1e-9))
    out[n + 4] = reset_at
    out[n + 5] = ok and 0 or sliding_retry_after(count, previous, now, finish, length, spec)
    return
  end
  out[n + 2] = count
  out[n + 3] = max(0, spec.limit - count)
  out[n + 4] = finish
  out[n + 5] = ok and 0 or finish - now
end

local server_now
local out = {}
local key_at = 0
local at = 2
for _ = 1, tonumber(ARGV[1]) do
  local now = ARGV[at]
  if now == "" then
    if server_now == nil then
      local time = call("TIME")
      server_now = tonumber(time[1]) * 1000 + floor(tonumber(time[2]) / 1000)
    end
    now = server_now
  else
    now = tonumber(now)
  end
  local n = tonumber(ARGV[at + 1])
  at = at + 2
  local specs = {}
  local admitted = true
  for i = 1, n do
    local window = ARGV[at + 2]
    -- Every field up front: a table that grows field by field rehashes several times.
    local spec = {
      algorithm = ARGV[at],
      limit = tonumber(ARGV[at + 1]),
      cost = tonumber(ARGV[at + 3]),
      observe = ARGV[at + 4] == "o",
      ms = false, months = false,
      index = 0, start = 0, finish = 0,
      count = 0, previous = 0, tat = false, ok = false,
    }
    if byte(window, 1) == 109 then -- "m"
      spec.months = tonumber(sub(window, 2))
    else
      spec.ms = tonumber(window)
    end
    at = at + 5
    locate(spec, now)
    load(spec, call("GET", KEYS[key_at + i]))
    local ok = allows(spec, now)
    spec.ok = ok
    if not ok and not spec.observe then admitted = false end
    specs[i] = spec
  end
  for i = 1, n do
    local spec = specs[i]
    local ok = spec.ok
    -- Refused requests count only on the enforcing counters that refused them.
    if admitted or not ok or spec.observe then
      local encoded, expiry = count_request(spec, now, ok)
      if expiry > now then
        call("SET", KEYS[key_at + i], encoded, "PXAT", expiry)
      else
        call("DEL", KEYS[key_at + i])
      end
    end
    describe(out, spec, now, ok)
  end
  key_at = key_at + n
end
return out
`;
