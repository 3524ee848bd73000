-- memory_pressure: the statements of memory_pressure (a device's memory peak near its size, an
-- allocator reserve much larger than its use, driver allocations inside the repeated steps).
-- $parameters as in scopes.sql.

-- device_peaks: a device's memory_peaks rows of scope 'device', torch's allocator first.
--   $sid, $dev  the device
SELECT allocator, peak_allocated_bytes, peak_reserved_bytes, pct_of_device, peak_ns, top_ops
FROM memory_peaks WHERE scope = 'device' AND source_id = $sid AND device_id = $dev
ORDER BY allocator = 'pytorch' DESC, allocator;

-- memory_peaks: evidence: every memory_peaks row of a device (its scopes and phases), highest peak first.
--   $sid, $dev  the device
SELECT scope, phase, allocator, allocated_at_start, allocated_at_end, peak_allocated_bytes,
       peak_reserved_bytes, pct_of_device, top_ops
FROM memory_peaks WHERE source_id = $sid AND device_id = $dev
ORDER BY peak_allocated_bytes DESC NULLS LAST, scope, phase, allocator;

-- allocator_calls: the driver allocator calls (cudaMalloc / cudaFree / cuMemAlloc / cuMemFree /
-- hipMalloc / hipFree, not the Host or Async ones) started inside a steady window, by name.
--   name     VARCHAR  the call
--   calls    BIGINT   calls
--   host_ns  BIGINT   their host time
--   $sid  the source; $w0, $w1  the steady window
SELECT name, count(*) AS calls, sum(dur_ns)::BIGINT AS host_ns
FROM api_calls WHERE source_id = $sid AND start_ns >= $w0 AND start_ns < $w1
  AND regexp_matches(name, '^(cudaMalloc|cudaFree|cuMemAlloc|cuMemFree|hipMalloc|hipFree)')
  AND NOT regexp_matches(name, 'Host|Async')
GROUP BY name ORDER BY host_ns DESC, name;
