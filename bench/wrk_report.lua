-- Reports a timestamped sensor value to distinct shadows: each wrk thread cycles over its own
-- things (10,000 unless given: wrk ... -s wrk_report.lua URL -- THINGS), so consecutive
-- requests hit different shadows. API=aws sends the same report through the AWS IoT API
-- (UpdateThingShadow of the classic shadow) instead of API v1.
local counter = 0
thread_id = 0  -- a global: setup() sets it per thread
local ids = 0
local things = 10000
local aws = os.getenv("API") == "aws"
local epoch_us = os.time() * 1000000  -- timestamps (µs) newer than any earlier run's

function setup(thread)
  ids = ids + 1
  thread:set("thread_id", ids)
end

function init(args)
  if args[1] then things = tonumber(args[1]) end
end

function request()
  counter = counter + 1
  local thing = "dev-" .. thread_id .. "-" .. (counter % things)
  local temp = string.format('{"temp":{"value":%d.5,"ts":%d}}', counter % 40, epoch_us + counter)
  if aws then
    return wrk.format("POST", "/things/" .. thing .. "/shadow", {["Content-Type"] = "application/json"},
                      '{"state":{"reported":' .. temp .. '}}')
  end
  return wrk.format("POST", "/v1/things/" .. thing .. "/shadows/main/reported",
                    {["Content-Type"] = "application/json"}, '{"state":' .. temp .. '}')
end
