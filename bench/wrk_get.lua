-- Reads random shadows among the first `shadows` populated things (default 10,000); API=aws
-- reads them through the AWS IoT API (GetThingShadow of the classic shadow).
local shadows = tonumber(os.getenv("SHADOWS") or "10000")
local aws = os.getenv("API") == "aws"
math.randomseed(os.time())

function request()
  local thing = "pop-" .. math.random(0, shadows - 1)
  if aws then return wrk.format("GET", "/things/" .. thing .. "/shadow") end
  return wrk.format("GET", "/v1/things/" .. thing .. "/shadows/main")
end
