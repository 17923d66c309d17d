-- Reports a timestamped sensor value to distinct shadows: each wrk thread cycles over its
-- own 10,000 things, so consecutive requests hit different shadows.
local counter = 0
local thread_id = 0
local ids = 0

function setup(thread)
  ids = ids + 1
  thread:set("thread_id", ids)
end

function request()
  counter = counter + 1
  local thing = "dev-" .. thread_id .. "-" .. (counter % 10000)
  local body = string.format('{"state":{"temp":{"value":%d.5,"ts":%d}}}', counter % 40, counter)
  return wrk.format("POST", "/v1/things/" .. thing .. "/shadows/main/reported",
                    {["Content-Type"] = "application/json"}, body)
end
