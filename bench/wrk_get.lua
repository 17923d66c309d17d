-- Reads random shadows among the first `shadows` populated things (default 10,000).
local shadows = tonumber(os.getenv("SHADOWS") or "10000")
math.randomseed(os.time())

function request()
  return wrk.format("GET", "/v1/things/pop-" .. math.random(0, shadows - 1) .. "/shadows/main")
end
