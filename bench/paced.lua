-- wrk script: a fixed request rate (Debian's wrk has no --rate, unlike wrk2).
-- Each wrk thread owns an evenly spaced schedule of send times for its share of
-- BENCH_RATE; a connection that finished its previous request waits for the next free
-- slot (delay()), so the offered load does not follow the server's speed as long as
-- BENCH_CONNS connections suffice. wrk's latency excludes that wait.
-- Environment: BENCH_RATE (req/s, all threads), BENCH_TARGET (path, may hold {id}),
-- BENCH_METHOD, BENCH_BODY (may hold {id}), BENCH_IDS (file of ids, one a line).
-- Prints one line "BENCH {json}" with the request count, duration, p50/p90/p99/max in ms
-- and the error count (socket errors, timeouts and HTTP statuses >= 400).
local ffi = require("ffi")
ffi.cdef [[
typedef struct { long sec; long nsec; } bench_timespec;
int clock_gettime(int clk, bench_timespec *ts);
]]
local ts = ffi.new("bench_timespec")
local function now_ms()
  ffi.C.clock_gettime(1, ts) -- CLOCK_MONOTONIC
  return tonumber(ts.sec) * 1000 + tonumber(ts.nsec) / 1e6
end

local threads = {}
local nthreads = 0

function setup(thread)
  nthreads = nthreads + 1
  thread:set("id", nthreads)
  table.insert(threads, thread)
end

local interval, next_slot, ids, target, method, body

function init(args)
  local rate = tonumber(os.getenv("BENCH_RATE") or "1000")
  local nthr = tonumber(os.getenv("BENCH_THREADS") or "0")
  if nthr == 0 then nthr = 1 end
  target = os.getenv("BENCH_TARGET") or "/"
  method = os.getenv("BENCH_METHOD") or "GET"
  body = os.getenv("BENCH_BODY") or ""
  if body == "" then body = nil end
  ids = {}
  local path = os.getenv("BENCH_IDS") or ""
  if path ~= "" then
    for line in io.lines(path) do
      if line ~= "" then table.insert(ids, line) end
    end
  end
  math.randomseed(os.time() + (id or 0) * 7919)
  interval = nthr / rate * 1000 -- ms between this thread's sends
  next_slot = now_ms() + (id or 0) * interval / nthr
end

function delay()
  local t = now_ms()
  if next_slot < t then next_slot = t end
  local wait = next_slot - t
  next_slot = next_slot + interval
  return wait
end

function request()
  local p, b = target, body
  if #ids > 0 then
    local v = ids[math.random(#ids)]
    p = p:gsub("{id}", v)
    if b then b = b:gsub("{id}", v) end
  end
  local headers = {}
  if b then headers["Content-Type"] = "application/json" end
  return wrk.format(method, p, headers, b)
end

function done(summary, latency, requests)
  local e = summary.errors
  local errors = e.connect + e.read + e.write + e.status + e.timeout
  io.write(string.format(
    'BENCH {"requests":%d,"duration_s":%.3f,"p50_ms":%.3f,"p90_ms":%.3f,"p99_ms":%.3f,' ..
    '"max_ms":%.3f,"errors":%d,"status_errors":%d,"timeouts":%d}\n',
    summary.requests, summary.duration / 1e6, latency:percentile(50) / 1000,
    latency:percentile(90) / 1000, latency:percentile(99) / 1000, latency.max / 1000,
    errors, e.status, e.timeout))
end
