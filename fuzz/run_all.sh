#!/bin/sh
# Runs every target for RUNS executions (or MAX_TIME seconds), one at a time, one process each.
# Usage: fuzz/run_all.sh [RUNS] [MAX_TIME]; logs in fuzz/logs/<target>.log.
#
# config_json, msprobe_config and mapping_file run without AddressSanitizer (`-s none`, its own target directory): the code it
# reaches (config parsing, serde_json, regex) is safe Rust, and ASan's allocator bookkeeping
# made it about 8x slower (1.1k against 10k executions per second). Panics, broken
# invariants, timeouts and memory limits are caught either way. The other targets reach
# dump-core's and dump-npy's unsafe code and keep ASan.
cd "$(dirname "$0")" || exit 1
RUNS=${1:-10000000}
MAX_TIME=${2:-1200}
for t in ${TARGETS:-config_json msprobe_config mapping_file npy file_name csv_row wire stream_dialect cann_dump onnx_inline onnx_cut pt}; do
    mkdir -p "work/$t" logs
    case "$t" in
        config_json | msprobe_config | mapping_file) san="none" dir="target-nosan" ;;
        *) san="address" dir="target" ;;
    esac
    # libFuzzer exits when a corpus directory it is given does not exist (stream_dialect
    # has no seeds/ directory): only the ones present are passed.
    dirs="work/$t"
    for d in "seeds/$t" "corpus/$t"; do [ -d "$d" ] && dirs="$dirs $d"; done
    # shellcheck disable=SC2086 # $dirs is a list of paths without spaces
    CARGO_TARGET_DIR="$dir" cargo +nightly fuzz run -O -s "$san" "$t" $dirs \
        -- -runs="$RUNS" -max_total_time="$MAX_TIME" -print_final_stats=1 \
        > "logs/$t.log" 2>&1
    echo "$t exit $?" >> logs/summary.txt
done
