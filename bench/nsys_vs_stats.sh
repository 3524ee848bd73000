#!/usr/bin/env bash
# Side by side on one machine: `nsys stats` (cuda_gpu_kern_sum + cuda_api_sum) versus tracekit
# (convert + hotspots + api_summary) on the same nsys SQLite export.
#   bench/nsys_vs_stats.sh EXPORT.sqlite [RUNS]       (needs $NSYS: see ../shared/gpu/README.md)
# Prints one line per run and tool: wall seconds (and tracekit's phase timings as JSON).
set -euo pipefail
db=$1; runs=${2:-3}
cd "$(dirname "$0")/.."
py=${PYTHON:-python3}
for i in $(seq "$runs"); do
  rm -rf /tmp/tk-stats && mkdir -p /tmp/tk-stats
  t0=$(date +%s.%N)
  "$NSYS" stats --format csv -o /tmp/tk-stats/s --report cuda_gpu_kern_sum,cuda_api_sum "$db" >/dev/null
  t1=$(date +%s.%N)
  echo "run $i nsys stats cuda_gpu_kern_sum+cuda_api_sum: $("$py" -c "print(round($t1 - $t0, 2))") s"
  rm -f /tmp/tk-stats/t.duckdb
  t0=$(date +%s.%N)
  out=$("$py" bench/_job.py tracekit "$db" /tmp/tk-stats/t.duckdb "select * from hotspots" "select * from api_summary")
  t1=$(date +%s.%N)
  echo "run $i tracekit convert+hotspots+api_summary: $("$py" -c "print(round($t1 - $t0, 2))") s  $out"
done
