-- runtime_compile: the statements of the --phase rule runtime_compile (the host loading or
-- compiling GPU code for at least compile_pct % of the phase's window). $parameters as in scopes.sql.

-- compile_calls: a source's code-loading and compiling API calls (tk_is_compile_call), by name.
--   name      VARCHAR  the call
--   calls     BIGINT   calls
--   total_ns  BIGINT   their time
--   max_ns    BIGINT   the longest
--   $sid  the source
SELECT name, count(*) AS calls, sum(dur_ns)::BIGINT AS total_ns, max(dur_ns) AS max_ns
FROM api_calls WHERE source_id = $sid AND tk_is_compile_call(name)
GROUP BY name ORDER BY total_ns DESC;
