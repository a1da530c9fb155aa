/**
 * The part of the store's Lua (script.ts) that places windows in time: a window's index, start
 * and length for windows of milliseconds or of calendar months (UTC, civil-from-days arithmetic
 * from the epoch), with the same expressions as src/core/windows.ts. Inserted into the script's
 * text as it is: it uses the standard functions script.ts binds (`floor`).
 */
export const CALENDAR_LUA = `local function days_from_civil(y, m, d)
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

-- A window is ms milliseconds long, or months calendar months (ms is then false).
local function start_of(ms, months, index)
  if ms then return index * ms end
  return month_start(index * months)
end

local function index_at(ms, months, now)
  if ms then return floor(now / ms) end
  return floor(months_since_epoch(now) / months)
end

-- Length of the window containing now (a month's own length).
local function length_at(ms, months, now)
  if ms then return ms end
  local index = floor(months_since_epoch(now) / months)
  return month_start((index + 1) * months) - month_start(index * months)
end

`;
