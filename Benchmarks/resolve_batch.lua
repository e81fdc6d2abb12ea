-- wrk script (Benchmarks/warm_wrk_bench.py): POSTs resolve-batch bodies for
-- identities u0, u1, … in turn, the bodies fpctl warm sends for two
-- placements, and reads the answers without parsing them.
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
local counter = 0
request = function()
  counter = counter + 1
  local body = string.format(
    '{"attributes":{},"placement_keys":["onboarding","paywall"],"user_id":"u%d"}', counter)
  return wrk.format(nil, "/apps/demo/placements/resolve-batch", nil, body)
end
