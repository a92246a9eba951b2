-- wrk script: POST the body in $BODY_FILE as application/json and print a
-- machine-readable summary line at the end.
local f = assert(io.open(os.getenv("BODY_FILE"), "rb"))
wrk.method = "POST"
wrk.body = f:read("*a")
f:close()
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Accept"] = "application/json"

function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    "WRK_JSON {\"requests\": %d, \"duration_us\": %d, \"bytes\": %d, " ..
    "\"p50_us\": %d, \"p90_us\": %d, \"p99_us\": %d, \"max_us\": %d, \"mean_us\": %.2f, " ..
    "\"err_connect\": %d, \"err_read\": %d, \"err_write\": %d, \"err_status\": %d, \"err_timeout\": %d}\n",
    summary.requests, summary.duration, summary.bytes,
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.max, latency.mean,
    e.connect, e.read, e.write, e.status, e.timeout))
end
