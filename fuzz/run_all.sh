#!/bin/sh
# Runs every target for RUNS executions (or MAX_TIME seconds), one at a time, one process each.
# Usage: fuzz/run_all.sh [RUNS] [MAX_TIME]; logs in fuzz/logs/<target>.log.
cd "$(dirname "$0")" || exit 1
RUNS=${1:-10000000}
MAX_TIME=${2:-1200}
for t in ${TARGETS:-config_json npy file_name csv_row wire}; do
    mkdir -p "work/$t" logs
    cargo +nightly fuzz run -O "$t" "work/$t" "seeds/$t" "corpus/$t" -- \
        -runs="$RUNS" -max_total_time="$MAX_TIME" -print_final_stats=1 \
        > "logs/$t.log" 2>&1
    echo "$t exit $?" >> logs/summary.txt
done
