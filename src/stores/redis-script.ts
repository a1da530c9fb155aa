/**
 * The one Lua script the Redis store runs: it applies every counter of one request (all in one
 * hash slot) in a single atomic call, with the same three phases and the same arithmetic as
 * `src/core/algorithms/*` and `src/stores/memory.ts`, and returns each counter's state.
 *
 * Call: `EVALSHA <sha> <n> key1..keyN now spec1..specN` where `now` is "" (read the server's
 * `TIME`, so that gateways with skewed clocks agree) or the caller's epoch ms, and each spec is
 * five arguments: algorithm (`f` fixed window, `s` sliding window, `t` token bucket), limit,
 * window (`60000` ms or `m1` calendar months, UTC), cost, mode (`e` enforce, `o` observe).
 *
 * Reply: five integers per counter: allowed (1/0), count, remaining, resetAt (epoch ms),
 * retryAfterMs (-1 stands for "never", the token bucket's answer for a limit of 0).
 *
 * State: a windowed counter is stored as "index count previous", a token bucket as its
 * theoretical arrival time, both printed with 17 significant digits so that a double survives
 * the round trip exactly. Keys expire at the moment their state stops mattering (`PXAT`), so
 * no maintenance job is needed.
 *
 * Lua in Redis computes with the same IEEE doubles as JavaScript; every expression below keeps
 * the operation order of its TypeScript twin so that both give bit-identical results (a test
 * drives both with the same random sequences).
 */
export const APPLY_COUNTERS_LUA = `
local DAY_MS = 86400000
local EPSILON = 1e-6

local function days_from_civil(y, m, d)
  if m <= 2 then y = y - 1 end
  local era = math.floor(y / 400)
  local yoe = y - era * 400
  local mp = m > 2 and m - 3 or m + 9
  local doy = math.floor((153 * mp + 2) / 5) + d - 1
  local doe = yoe * 365 + math.floor(yoe / 4) - math.floor(yoe / 100) + doy
  return era * 146097 + doe - 719468
end

local function months_since_epoch(ms)
  local z = math.floor(ms / DAY_MS) + 719468
  local era = math.floor(z / 146097)
  local doe = z - era * 146097
  local yoe = math.floor((doe - math.floor(doe / 1460) + math.floor(doe / 36524) - math.floor(doe / 146096)) / 365)
  local doy = doe - (365 * yoe + math.floor(yoe / 4) - math.floor(yoe / 100))
  local mp = math.floor((5 * doy + 2) / 153)
  local m = mp < 10 and mp + 3 or mp - 9
  local y = yoe + era * 400
  if m <= 2 then y = y + 1 end
  return (y - 1970) * 12 + (m - 1)
end

local function month_start(months)
  return days_from_civil(1970 + math.floor(months / 12), months % 12 + 1, 1) * DAY_MS
end

local function window_at(spec, now)
  if spec.ms then
    local index = math.floor(now / spec.ms)
    return index, index * spec.ms, (index + 1) * spec.ms
  end
  local index = math.floor(months_since_epoch(now) / spec.months)
  return index, month_start(index * spec.months), month_start((index + 1) * spec.months)
end

local function window_end_of(spec, index)
  if spec.ms then return (index + 1) * spec.ms end
  return month_start((index + 1) * spec.months)
end

local function roll(state, index)
  if state == nil or state.index == index then return state end
  local previous = 0
  if state.index == index - 1 then previous = state.count end
  return { index = index, count = 0, previous = previous }
end

local function decode(spec, raw)
  if not raw then return nil end
  if spec.algorithm == "t" then
    local tat = tonumber(raw)
    if tat == nil then return nil end
    return { tat = tat }
  end
  local index, count, previous = string.match(raw, "^(%S+) (%S+) (%S+)$")
  if index == nil then return nil end
  return { index = tonumber(index), count = tonumber(count), previous = tonumber(previous) }
end

local function encode(spec, state)
  if spec.algorithm == "t" then return string.format("%.17g", state.tat) end
  return string.format("%.17g %.17g %.17g", state.index, state.count, state.previous)
end

-- Sliding window: this window's count plus the previous one's, weighted by its overlap.
local function estimate(state, now, spec)
  if state == nil then return 0 end
  local _, start, finish = window_at(spec, now)
  local weight = (finish - now) / (finish - start)
  return state.previous * weight + state.count
end

local function token_interval(spec, now)
  local _, start, finish = window_at(spec, now)
  return (finish - start) / spec.limit, finish - start
end

local function allows(spec, state, now)
  if spec.algorithm == "t" then
    local tat = now
    if state ~= nil and state.tat > now then tat = state.tat end
    local step, length = token_interval(spec, now)
    return tat + spec.cost * step - now <= length + EPSILON
  end
  local index = window_at(spec, now)
  local current = roll(state, index)
  if spec.algorithm == "s" then
    return estimate(current, now, spec) + spec.cost <= spec.limit
  end
  local count = 0
  if current ~= nil then count = current.count end
  return count + spec.cost <= spec.limit
end

local function count_request(spec, state, now, ok)
  if spec.algorithm == "t" then
    local tat = now
    if state ~= nil and state.tat > now then tat = state.tat end
    if not ok then return { tat = tat } end
    local step = token_interval(spec, now)
    return { tat = tat + spec.cost * step }
  end
  local index = window_at(spec, now)
  local current = roll(state, index)
  local count, previous = 0, 0
  if current ~= nil then count, previous = current.count, current.previous end
  return { index = index, count = count + spec.cost, previous = previous }
end

local function expires_at(spec, state)
  if spec.algorithm == "t" then return math.ceil(state.tat) end
  if spec.algorithm == "s" then return window_end_of(spec, state.index + 1) end
  return window_end_of(spec, state.index)
end

local function sliding_retry_after(count, previous, now, finish, length, spec)
  local limit, cost = spec.limit, spec.cost
  if count + cost <= limit and previous > 0 then
    local pass_at = finish - ((limit - cost - count) * length) / previous
    return math.max(1, math.ceil(pass_at - now))
  end
  local next_end = finish + length
  if limit - cost < 0 or count == 0 then return next_end - now end
  local pass_at = next_end - ((limit - cost) * length) / count
  return math.max(1, math.ceil(pass_at - now))
end

-- Appends allowed, count, remaining, resetAt, retryAfterMs.
local function describe(out, spec, state, now, ok)
  local allowed = ok and 1 or 0
  if spec.algorithm == "t" then
    local step, length = token_interval(spec, now)
    local tat = now
    if state ~= nil and state.tat > now then tat = state.tat end
    local in_use = (tat - now) / step
    local retry = 0
    if not ok then
      retry = math.max(1, math.ceil(tat + spec.cost * step - length - now))
      if retry == math.huge then retry = -1 end
    end
    out[#out + 1] = allowed
    out[#out + 1] = math.ceil(in_use - EPSILON)
    out[#out + 1] = math.max(0, math.floor(spec.limit - in_use + EPSILON))
    out[#out + 1] = math.ceil(tat)
    out[#out + 1] = retry
    return
  end
  local index, start, finish = window_at(spec, now)
  local current = roll(state, index)
  local count, previous = 0, 0
  if current ~= nil then count, previous = current.count, current.previous end
  if spec.algorithm == "s" then
    local length = finish - start
    local used = estimate(current, now, spec)
    local reset_at = now
    if count > 0 then reset_at = finish + length elseif previous > 0 then reset_at = finish end
    out[#out + 1] = allowed
    out[#out + 1] = math.ceil(used - 1e-9)
    out[#out + 1] = math.max(0, math.floor(spec.limit - used + 1e-9))
    out[#out + 1] = reset_at
    out[#out + 1] = ok and 0 or sliding_retry_after(count, previous, now, finish, length, spec)
    return
  end
  out[#out + 1] = allowed
  out[#out + 1] = count
  out[#out + 1] = math.max(0, spec.limit - count)
  out[#out + 1] = finish
  out[#out + 1] = ok and 0 or finish - now
end

local now
if ARGV[1] == "" then
  local time = redis.call("TIME")
  now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
else
  now = tonumber(ARGV[1])
end

local n = #KEYS
local specs, states, oks = {}, {}, {}
local admitted = true
for i = 1, n do
  local at = 2 + (i - 1) * 5
  local window = ARGV[at + 2]
  local spec = {
    algorithm = ARGV[at],
    limit = tonumber(ARGV[at + 1]),
    cost = tonumber(ARGV[at + 3]),
    observe = ARGV[at + 4] == "o",
  }
  if string.sub(window, 1, 1) == "m" then
    spec.months = tonumber(string.sub(window, 2))
  else
    spec.ms = tonumber(window)
  end
  specs[i] = spec
  local state = decode(spec, redis.call("GET", KEYS[i]))
  states[i] = state
  local ok = allows(spec, state, now)
  oks[i] = ok
  if not ok and not spec.observe then admitted = false end
end

local out = {}
for i = 1, n do
  local spec, state, ok = specs[i], states[i], oks[i]
  -- Refused requests count only on the enforcing counters that refused them.
  if admitted or not ok or spec.observe then
    state = count_request(spec, state, now, ok)
    local expiry = expires_at(spec, state)
    if expiry > now then
      redis.call("SET", KEYS[i], encode(spec, state), "PXAT", string.format("%.17g", expiry))
    else
      redis.call("DEL", KEYS[i])
    end
  end
  describe(out, spec, state, now, ok)
end
return out
`;

/** SHA1 of `APPLY_COUNTERS_LUA`, what `SCRIPT LOAD` returns (a test keeps them in step). */
export const APPLY_COUNTERS_SHA = "5ecbdae861a68c822ddd6cc7d000ea5cbacde826";
