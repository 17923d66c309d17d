-- The ceiling: GET / on the fixed-200 server.
function request()
  return wrk.format("GET", "/")
end
