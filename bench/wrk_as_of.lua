-- As-of reads of one shadow (THING) at random moments between FIRST and LAST (Unix seconds,
-- fractional), or plain GETs of it with MODE=get: the same request path either way.
local thing = os.getenv("THING") or "tt-bench"
local first = tonumber(os.getenv("FIRST") or "0")
local last = tonumber(os.getenv("LAST") or "0")
local get = os.getenv("MODE") == "get"
math.randomseed(os.time())

function request()
  local path = "/v1/things/" .. thing .. "/shadows/main"
  if get then return wrk.format("GET", path) end
  local t = first + math.random() * (last - first)
  local s = math.floor(t)
  local ns = math.floor((t - s) * 1e9)
  return wrk.format("GET", path .. "?asOf=" .. os.date("!%Y-%m-%dT%H:%M:%S", s) .. string.format(".%09dZ", ns))
end
