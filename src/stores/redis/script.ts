/**
 * The Lua that the Redis store runs: it applies every counter of one or more requests (all in
 * one hash slot on a Cluster) in a single atomic call, with the same three phases and the same
 * arithmetic as `src/core/algorithms/*` and `src/stores/memory.ts`, and returns each counter's
 * state.
 *
 * One source, two forms: a Redis 7 function library (`FUNCTION LOAD` once, then `FCALL`), whose
 * helpers are created once per load, and the same code as a script (`EVALSHA`) for servers
 * without functions. Both take the same keys and arguments and give the same reply.
 *
 * Call: `FCALL <APPLY_COUNTERS_FUNCTION> <keys> key... (<now> spec1..specN)...` (or `EVALSHA
 * <APPLY_COUNTERS_SHA>` with the same keys and arguments): one or more requests, applied one
 * after the other, each atomically and all-or-nothing on its own counters (one key per spec, in
 * order). `now` is "" (read the server's `TIME`, once per call, so that gateways with skewed
 * clocks agree) or the caller's epoch ms; a request's specs run up to the next `now`. A spec is
 * one argument, `"w 60 60000 1"`: algorithm and mode in one letter (`w` fixed window, `s`
 * sliding window, `t` token bucket; upper case for an observing counter), limit, window
 * (`60000` ms, or `m1` calendar months, UTC), cost. A `w` counter counts in its window's key
 * (`window_key`: the declared key, `|w`, span and index; same hash tag, same slot), an integer
 * that the store also increments without the script (fixed-windows.ts), so windows are kept
 * apart and a request stamped late counts in its own window. (`f`, a fixed window in the
 * counter's own key as earlier versions sent it, is still read: tests and the bench use it.)
 *
 * Reply: five integers per counter, in order: allowed (1/0), count, remaining, resetAt (epoch
 * ms), retryAfterMs (-1 stands for "never", the token bucket's answer for a limit of 0); then,
 * when the call read the server's `TIME`, that time (epoch ms), which hybrid reservations follow.
 *
 * State: one string per counter, its algorithm's letter and then IEEE doubles (Lua's `struct`),
 * so that reading it parses nothing and a double survives the round trip exactly: a windowed
 * counter is `index count previous span` (span: the window's length in ms, or minus its months,
 * as `windowSpanOf`), a token bucket its theoretical arrival time and its key's expiry. A state
 * of another algorithm or another span is no state for the counter (a reload changed its rule),
 * as in the memory store. States written as text by earlier versions ("index count previous
 * span", "index count previous", or the arrival time printed with 17 digits) are read as those
 * versions read them, and written back as text while they matter (see settle_windowed).
 *
 * Windows never move backwards: a request stamped before the stored window is counted in the
 * stored window, at its start (`countedAt` in src/core/algorithms/fixed-window.ts). Keys expire
 * when their state stops mattering (and `LATE_GRACE_MS`, 2 s, later, for a late request), from
 * the time the script counts with (`PX`, a duration): the server applies it on its own clock,
 * so a caller whose clock is behind the server's never writes an expiry that is already past.
 * The first write of a window sets it; the writes after it keep it (`KEEPTTL`). A refused
 * request leaves a token bucket as it was. A counter of cost 0 is read and never written (no
 * key made, no expiry set, no other algorithm's state dropped): a peek (src/core/peek.ts),
 * rls's `hits_addend: 0`, a hybrid reservation's read of its fence.
 *
 * Every expression keeps its TypeScript twin's operation order (Lua in Redis computes with the
 * same doubles), so both give bit-identical results (a test drives both with the same random
 * sequences). No table per counter, no string but the state written and a `w` window key: in
 * Redis, that churn costs more than the arithmetic (bench/redis.bench.ts: server time).
 */
import { CALENDAR_LUA } from "./script-calendar.js";

const CORE = `
-- Redis 7.0 runs a library's top level without the standard libraries: they are bound on the
-- first call, into upvalues that the library's functions then share.
local floor, ceil, max, huge, to_number, byte, sub, match, format, pack, unpack_state
local function bind()
  floor, ceil, max, huge = math.floor, math.ceil, math.max, math.huge
  to_number, byte, sub, match, format = tonumber, string.byte, string.sub, string.match, string.format
  pack, unpack_state = struct.pack, struct.unpack
end

local DAY_MS = 86400000
local EPSILON = 1e-6
-- LATE_GRACE_MS (src/core/windows.ts): a key outlives its state's expiry by this much, so that a
-- request that reaches Redis late still finds its window's count.
local LATE_GRACE = 2000
local SLIDING, BUCKET = 115, 116 -- "s", "t" (and "f", the fixed window)
-- "w": a fixed window counted in a key of its own per window (window_key), as a plain integer
-- that the store's blind path (src/stores/redis/fixed-windows.ts) increments without a script.
local KEYED = 119
-- How a windowed state is written back: as bytes with a new expiry, as bytes keeping the key's
-- expiry (a state written for the same window), or as text (see WRITE_TEXT below).
local WRITE_BYTES, KEEP_EXPIRY, WRITE_TEXT = 0, 1, 2
local LOWER_CASE_A, DIGIT_NINE = 97, 57

${CALENDAR_LUA}-- The key of a keyed fixed window: the counter's key, then its window's span and index (the same
-- name as windowKeyOf in src/stores/redis/fixed-windows.ts). Its hash tag is the counter key's,
-- so it lives in the same Cluster slot as the key the call declared.
local function window_key(key, ms, months, index)
  return key .. "|w" .. format("%d", ms or -months) .. ":" .. format("%d", index)
end

-- Counter specs by their text ("f 100 60000 1": algorithm letter, limit, window, cost):
-- converting text to numbers (strtod) costs more than a counter's arithmetic, and a policy's
-- specs repeat from call to call. Bounded: emptied when full.
local MAX_SPECS = 256
local specs, specs_held = {}, 0

-- code (the lower-case letter's byte), limit, ms, months, cost, observe.
local function spec_of(text)
  local spec = specs[text]
  if spec == nil then
    local letter, limit, window, cost = match(text, "^(%a) (%S+) (%S+) (%S+)$")
    if letter == nil then error("ERR edgelimit: bad counter spec '" .. text .. "'") end
    local code = byte(letter)
    local observe = code < LOWER_CASE_A
    if observe then code = code + 32 end
    local ms, months = to_number(window), false
    if not ms then months = to_number(sub(window, 2)) end
    spec = { code, to_number(limit), ms, months, to_number(cost), observe }
    if specs_held >= MAX_SPECS then specs, specs_held = {}, 0 end
    specs[text] = spec
    specs_held = specs_held + 1
  end
  return spec[1], spec[2], spec[3], spec[4], spec[5], spec[6]
end

-- The value a counter's request at now reads: its key's, or its window's key (a keyed window).
local function read(call, key, text, now)
  local code, _, ms, months = spec_of(text)
  if code == KEYED then return call("GET", window_key(key, ms, months, index_at(ms, months, now))) end
  return call("GET", key)
end

-- Where a windowed counter counts a request stamped now (countedAt, then rollWindow): the
-- window's index, the time it counts at, the state rolled into that window (count, previous),
-- how to write it back, and whether the key holds a state of another algorithm.
local function windowed_at(raw, code, ms, months, now)
  local index = index_at(ms, months, now)
  if not raw then return index, now, 0, 0, WRITE_BYTES, false end
  local first = byte(raw, 1)
  local stored, count, previous, span
  local form = KEEP_EXPIRY
  if first == code then
    local _
    _, stored, count, previous, span = unpack_state("<Bdddd", raw)
  elseif first ~= nil and first <= DIGIT_NINE then
    -- Text, from an earlier version (without the span in the oldest), or from a process of the
    -- previous version during a rolling upgrade.
    local i, c, p, s = match(raw, "^(%S+) (%S+) (%S+) ?(%S*)$")
    if i ~= nil then stored, count, previous, span = to_number(i), to_number(c), to_number(p), to_number(s) end
    form = WRITE_TEXT
  end
  if stored == nil then return index, now, 0, 0, WRITE_BYTES, true end
  -- A state of another window length belongs to another rule (a reload changed the window).
  if span == nil then
    if stored > index + 1 then return index, now, 0, 0, WRITE_BYTES, false end
  elseif span ~= (ms or -months) then
    return index, now, 0, 0, WRITE_BYTES, false
  end
  -- Counted late: in the counter's newest window, at its start; never rewound.
  if stored > index then return stored, start_of(ms, months, stored), count, previous, form, false end
  if stored == index then return index, now, count, previous, form, false end
  if stored == index - 1 then return index, now, 0, count, WRITE_BYTES, false end
  return index, now, 0, 0, WRITE_BYTES, false
end

-- A token bucket's theoretical arrival time, no earlier than now; the expiry its key was given
-- (false when unknown); whether to write it back as text (as settle_windowed: a text state
-- that still limits); whether the key holds a state of another algorithm.
local function arrival_at(raw, now)
  if not raw then return now, false, false, false end
  local first = byte(raw, 1)
  local tat, expires, as_text = nil, false, false
  if first == BUCKET then
    local _
    _, tat, expires = unpack_state("<Bdd", raw)
  elseif first ~= nil and first <= DIGIT_NINE then
    tat = to_number(raw)
    as_text = true
  end
  if tat == nil then return now, false, false, true end
  if tat < now then return now, expires, false, false end
  return tat, expires, as_text, false
end

local function sliding_retry_after(count, previous, now, finish, length, limit, cost)
  if count + cost <= limit and previous > 0 then
    local pass_at = finish - ((limit - cost - count) * length) / previous
    return max(1, ceil(pass_at - now))
  end
  local next_end = finish + length
  if limit - cost < 0 or count == 0 then return next_end - now end
  local pass_at = next_end - ((limit - cost) * length) / count
  return max(1, ceil(pass_at - now))
end

-- A token bucket: counts the request when counted and admitted (a refused request leaves the
-- bucket as it was), and returns allowed, count, remaining, resetAt, retryAfterMs. A state is
-- dropped when it expires at the time it is counted at. Its key's expiry is set a window
-- beyond the arrival time, so that the following requests, which move the arrival time a step
-- at a time, keep it (setting an expiry costs Redis more than the rest of the call).
local function settle_bucket(call, key, limit, ms, months, cost, now, ok, counted, present, tat, expires, as_text, foreign)
  local length = length_at(ms, months, now)
  local step = length / limit
  if counted and ok and cost > 0 then
    tat = tat + cost * step
    local needed = ceil(tat)
    if needed + LATE_GRACE - now <= 0 then
      call("DEL", key)
    elseif as_text then
      -- 17 significant digits: the double survives the round trip exactly.
      call("SET", key, format("%.17g", tat), "PX", ceil(needed + LATE_GRACE - now))
    elseif expires and needed + LATE_GRACE <= expires then
      call("SET", key, pack("<Bdd", BUCKET, tat, expires), "KEEPTTL")
    else
      local ttl = ceil(needed + length + LATE_GRACE - now)
      call("SET", key, pack("<Bdd", BUCKET, tat, now + ttl), "PX", ttl)
    end
  elseif foreign and cost > 0 then
    -- Another algorithm's state.
    call("DEL", key)
  end
  local in_use = (tat - now) / step
  local retry = 0
  if not ok then
    retry = max(1, ceil(tat + cost * step - length - now))
    if retry == huge then retry = -1 end
  end
  return ok and 1 or 0, ceil(in_use - EPSILON), max(0, floor(limit - in_use + EPSILON)), ceil(tat), retry
end

-- A windowed counter: as settle_bucket. Its key expires when its count stops mattering; a
-- state written for this window already has that expiry, which the write keeps. A state read
-- as text in this window is written back as text: during a rolling upgrade, processes of the
-- previous version read only text, and would take bytes for an empty counter. The next window
-- is written as bytes.
local function settle_windowed(call, key, code, limit, ms, months, cost, ok, counted, index, at, count, previous, form, foreign)
  local start, finish = start_of(ms, months, index), start_of(ms, months, index + 1)
  if counted and cost > 0 then
    count = count + cost
    if form == KEEP_EXPIRY then
      call("SET", key, pack("<Bdddd", code, index, count, previous, ms or -months), "KEEPTTL")
    else
      local expiry = finish
      if code == SLIDING then expiry = start_of(ms, months, index + 2) end
      -- Whole numbers below 10^14 print exactly with Lua's number format (%.14g).
      local state = form == WRITE_TEXT and index .. " " .. count .. " " .. previous .. " " .. (ms or -months)
        or pack("<Bdddd", code, index, count, previous, ms or -months)
      call("SET", key, state, "PX", ceil(expiry + LATE_GRACE - at))
    end
  elseif foreign and cost > 0 then
    -- A state of another algorithm is dropped even when not counted, as the memory store does.
    call("DEL", key)
  end
  if code == SLIDING then
    local length = finish - start
    local used = previous * ((finish - at) / length) + count
    local reset_at = at
    if count > 0 then reset_at = finish + length elseif previous > 0 then reset_at = finish end
    return ok and 1 or 0, ceil(used - 1e-9), max(0, floor(limit - used + 1e-9)), reset_at,
      ok and 0 or sliding_retry_after(count, previous, at, finish, length, limit, cost)
  end
  return ok and 1 or 0, count, max(0, limit - count), finish, ok and 0 or finish - at
end

-- A counter for a request at now, from its spec and its key's value raw: code, limit, ms,
-- months, cost, observe; whether it allows the request (the algorithms' allows); where it is
-- counted (index, at) and its state there (count, previous: windowed_at; a token bucket's
-- arrival time in previous, its key's expiry in form); whether the key holds another
-- algorithm's state; whether the key holds a value at all; (token bucket) whether to write it
-- back as text. All returned as values, not a table: see settle.
local function assess(raw, spec, now)
  local code, limit, ms, months, cost, observe = spec_of(spec)
  if code == BUCKET then
    local tat, expires, as_text, foreign = arrival_at(raw, now)
    local length = length_at(ms, months, now)
    local ok = tat + cost * (length / limit) - now <= length + EPSILON
    return code, limit, ms, months, cost, observe, ok, 0, now, 0, tat, expires, foreign, raw ~= false, as_text
  end
  if code == KEYED then
    -- Its own window, whatever newer windows hold: a request stamped late counts in its window's
    -- key, which a newer window never shares.
    local count = raw and to_number(raw) or 0
    return code, limit, ms, months, cost, observe, count + cost <= limit, index_at(ms, months, now), now, count, 0, 0, false, raw ~= false, false
  end
  local index, at, count, previous, form, foreign = windowed_at(raw, code, ms, months, now)
  local ok
  if code == SLIDING then
    local start, finish = start_of(ms, months, index), start_of(ms, months, index + 1)
    ok = previous * ((finish - at) / (finish - start)) + count + cost <= limit
  else
    ok = count + cost <= limit
  end
  return code, limit, ms, months, cost, observe, ok, index, at, count, previous, form, foreign, raw ~= false, false
end

-- Counts the request on an assessed counter when it must, writes its state, and returns its
-- answer. Refused requests count only on the enforcing counters that refused them.
local function settle(call, key, admitted, code, limit, ms, months, cost, observe, ok, index, at, count, previous, form, foreign, present, as_text)
  local counted = admitted or not ok or observe
  if code == BUCKET then
    return settle_bucket(call, key, limit, ms, months, cost, at, ok, counted, present, previous, form, as_text, foreign)
  end
  if code == KEYED then
    local finish = start_of(ms, months, index + 1)
    if counted and cost > 0 then
      local window = window_key(key, ms, months, index)
      count = call("INCRBY", window, cost)
      -- The first count of a window gives its key the window's expiry (see the header).
      if not present then call("PEXPIRE", window, ceil(finish + LATE_GRACE - at)) end
    end
    return ok and 1 or 0, count, max(0, limit - count), finish, ok and 0 or finish - at
  end
  return settle_windowed(call, key, code, limit, ms, months, cost, ok, counted, index, at, count, previous, form, foreign)
end

-- Whether an assessed counter lets the request in: it allows it, or it only observes.
local function lets_in(_, _, _, _, _, observe, ok)
  return ok or observe
end

local function time_of(call, now)
  if now ~= "" then return to_number(now) end
  local time = call("TIME")
  return to_number(time[1]) * 1000 + floor(to_number(time[2]) / 1000)
end

local function apply(keys, args)
  if not floor then bind() end
  local call = redis.call
  local argc = #args
  -- One request of one or two counters, the usual calls, have their reply built at its final
  -- size: growing a table costs more than the arithmetic. A lone counter always counts.
  if argc == 2 then
    local key, now = keys[1], time_of(call, args[1])
    local allowed, count, remaining, reset_at, retry = settle(call, key, true, assess(read(call, key, args[2], now), args[2], now))
    -- The server's time last, when it was read: a reply ends at its first nil.
    return { allowed, count, remaining, reset_at, retry, args[1] == "" and now or nil }
  end
  if argc == 3 then
    local now = time_of(call, args[1])
    local key1, key2 = keys[1], keys[2]
    local code1, limit1, ms1, months1, cost1, observe1, ok1, index1, at1, count1, previous1, form1, foreign1, present1, text1 =
      assess(read(call, key1, args[2], now), args[2], now)
    local code2, limit2, ms2, months2, cost2, observe2, ok2, index2, at2, count2, previous2, form2, foreign2, present2, text2 =
      assess(read(call, key2, args[3], now), args[3], now)
    local admitted = (ok1 or observe1) and (ok2 or observe2)
    local allowed, count, remaining, reset_at, retry = settle(call, key1, admitted, code1, limit1,
      ms1, months1, cost1, observe1, ok1, index1, at1, count1, previous1, form1, foreign1, present1, text1)
    local allowed2, counted2, remaining2, reset_at2, retry2 = settle(call, key2, admitted, code2, limit2,
      ms2, months2, cost2, observe2, ok2, index2, at2, count2, previous2, form2, foreign2, present2, text2)
    return { allowed, count, remaining, reset_at, retry, allowed2, counted2, remaining2, reset_at2,
      retry2, args[1] == "" and now or nil }
  end
  local server_now
  local out, o = {}, 0
  local key_at, at = 0, 1
  while at <= argc do
    local now = args[at]
    if now ~= "" then
      now = to_number(now)
    else
      server_now = server_now or time_of(call, now)
      now = server_now
    end
    at = at + 1
    -- The request's specs run up to the next request's time (empty, or digits).
    local n = 0
    while at + n <= argc do
      local first = byte(args[at + n], 1)
      if first == nil or first <= DIGIT_NINE then break end
      n = n + 1
    end
    -- Admitted when every enforcing counter lets it in. The first pass's answers are not kept:
    -- the second pass reads each key again (a GET costs less than a table to keep them in).
    local admitted = true
    if n > 1 then
      for i = 1, n do
        local text = args[at + i - 1]
        if not lets_in(assess(read(call, keys[key_at + i], text, now), text, now)) then
          admitted = false
          break
        end
      end
    end
    for i = 1, n do
      local key = keys[key_at + i]
      out[o + 1], out[o + 2], out[o + 3], out[o + 4], out[o + 5] =
        settle(call, key, admitted, assess(read(call, key, args[at + i - 1], now), args[at + i - 1], now))
      o = o + 5
    end
    at = at + n
    key_at = key_at + n
  end
  if server_now then out[o + 1] = server_now end
  return out
end
`;

/** The Lua as a script, for `EVAL`/`EVALSHA` where functions are unavailable (Redis before 7). */
export const APPLY_COUNTERS_LUA = `${CORE}
return apply(KEYS, ARGV)
`;

/** SHA1 of `APPLY_COUNTERS_LUA`, what `SCRIPT LOAD` returns (a test keeps them in step). */
export const APPLY_COUNTERS_SHA = "0cdecc18ead396c2b04a4162ae9fab7b59f1e656";

/** Named with the script's SHA: two versions sharing one Redis each call their own, as EVALSHA. */
export const APPLY_COUNTERS_FUNCTION = `edgelimit_apply_${APPLY_COUNTERS_SHA.slice(0, 16)}`;

/** The Lua as a Redis 7 function library (`FUNCTION LOAD`), registering `APPLY_COUNTERS_FUNCTION`. */
export const APPLY_COUNTERS_LIBRARY = `#!lua name=${APPLY_COUNTERS_FUNCTION}
${CORE}
redis.register_function("${APPLY_COUNTERS_FUNCTION}", apply)
`;
