-- transfer_bound: the evidence of transfer_bound (memcpy time compute does not hide: the
-- --phase rule, and the copy category of the steady window). $parameters as in scopes.sql.

-- memop_time_summary: a source's memop_time_summary rows (every column).
--   $sid  the source
SELECT * FROM memop_time_summary WHERE source_id = $sid;

-- memop_size_summary: a source's memop_size_summary rows (every column).
--   $sid  the source
SELECT * FROM memop_size_summary WHERE source_id = $sid;
