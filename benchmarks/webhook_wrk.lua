-- wrk's script for benchmarks/webhook_load.py (issue #14): POST the reviews written one JSON
-- body a line to the file named by the first script argument, picked at random with a fixed
-- seed, and print the figures as one JSON line that the benchmark parses.
-- Correctness is the Python client's job (it checks every answer before this pass); here a
-- status other than 2xx/3xx is counted by wrk itself (summary.errors.status).

local requests = {}

function init(args)
  local file = assert(io.open(args[1], "r"))
  for body in file:lines() do
    requests[#requests + 1] = wrk.format(
      "POST", "/validate", { ["Content-Type"] = "application/json" }, body
    )
  end
  file:close()
  assert(#requests > 0, "no reviews in " .. args[1])
  math.randomseed(1)
end

function request()
  return requests[math.random(#requests)]
end

function done(summary, latency, _)
  local errors = summary.errors
  io.write(string.format(
    '{"requests": %d, "duration_us": %d, "p50_us": %d, "p90_us": %d, "p99_us": %d, "max_us": %d, ' ..
    '"mean_us": %.1f, "status_errors": %d, "socket_errors": %d}\n',
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(90), latency:percentile(99),
    latency.max, latency.mean, errors.status,
    errors.connect + errors.read + errors.write + errors.timeout
  ))
end
