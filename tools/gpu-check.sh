#!/usr/bin/env bash
# The GPU checks of issue 27 (dump-device-cuda on a real NVIDIA GPU), in one command.
#
#   tools/gpu-check.sh             on a GPU machine with Rust: build in release, then run
#   tools/gpu-check.sh pack DIR    build here (no GPU needed) and put the stripped binaries and
#                                  this script into DIR, for a GPU machine without Rust
#   bash DIR/gpu-check.sh run DIR  there: run what `pack` put into DIR
#
# What runs (each a failure when no GPU is usable: OPDUMP_REQUIRE_GPU=1):
#   - dump-device-cuda's tests/gpu.rs: every kernel against its CPU model bit for bit, every
#     dtype against the host statistics under the documented rules, tensors over 1 GiB,
#     unaligned starts, the copy paths;
#   - tests/cuda_gpu_dumper.rs: the Dumper with GPU tensors (device rows = host rows; full
#     dumps, whole and streamed through pinned buffers, = the device bytes);
#   - `cargo xtask bench-stats --device cuda --only cuda` (BENCH_ARGS adds options);
#   - dump-candle's CUDA model (test cuda_model, example cuda_overhead): built by cargo with the
#     `cuda` feature when nvcc is on the PATH (no-argument form), or from a bundle that
#     `adapters/dump-candle/ci/gpu-bundle.sh DIR/candle` made (run form).
# ONLY=gpu,dumper,bench,ncu,candle picks a subset (ncu: Nsight Compute sections of the kernels
# of the over-1-GiB test; only when named or when ONLY is unset and ncu exists). NVRTC: the machine's libnvrtc.so.12, else its
# libnvrtc.so.13 (the kernels use only API both have), found with `find`, or
# OPDUMP_NVRTC_LIB_DIR when already set. Output is also appended to $OUT/log when OUT is set.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)

pack() {
    local dir=$1
    mkdir -p "$dir/bin"
    cd "$root" || exit 1
    local exes
    exes=$(CARGO_INCREMENTAL=0 cargo test --release --no-run --message-format=json \
        -p dump-device-cuda --test gpu -p opdump-tests --test cuda_gpu_dumper 2>/dev/null |
        grep '"kind":\["test"\]' | grep -o '"executable":"[^"]*"' | sed 's/"executable":"//; s/"$//') || exit 1
    CARGO_INCREMENTAL=0 cargo build --release -p xtask || exit 1
    for e in $exes "$root/target/release/xtask"; do
        local name
        name=$(basename "$e" | sed 's/-[0-9a-f]\{16\}$//')
        cp "$e" "$dir/bin/$name" && strip "$dir/bin/$name" || exit 1
    done
    cp "$0" "$dir/gpu-check.sh"
    ls -l "$dir/bin"
}

find_nvrtc() {
    [ -n "${OPDUMP_NVRTC_LIB_DIR:-}" ] && return
    local nv pick real
    nv=$(find / \( -path /proc -o -path /sys \) -prune -o -name 'libnvrtc.so.1[23]*' -print 2>/dev/null |
        grep -v builtins | sort)
    pick=$(echo "$nv" | grep 'libnvrtc.so.12' | head -1)
    [ -z "$pick" ] && pick=$(echo "$nv" | grep 'libnvrtc.so.13' | head -1)
    [ -z "$pick" ] && { echo "no libnvrtc.so.12 or .13 on this machine"; return; }
    real=$(readlink -f "$pick")
    mkdir -p /tmp/opdump-nvrtc
    ln -sf "$real" /tmp/opdump-nvrtc/libnvrtc.so.12
    for b in "$(dirname "$real")"/libnvrtc-builtins*; do ln -sf "$b" /tmp/opdump-nvrtc/; done
    echo "NVRTC: $real"
    export OPDUMP_NVRTC_LIB_DIR=/tmp/opdump-nvrtc
    export LD_LIBRARY_PATH=/tmp/opdump-nvrtc:${LD_LIBRARY_PATH:-}
}

rc=0
step() {
    echo
    echo "== $*"
    local s
    s=$(date +%s)
    "$@"
    local r=$?
    echo "== rc=$r after $(($(date +%s) - s)) s: $1"
    [ $r -ne 0 ] && rc=$r
    return 0
}
want() { [ -z "${ONLY:-}" ] || [[ ",$ONLY," == *",$1,"* ]]; }

run() {
    local gpu dumper xtask
    gpu=$1 dumper=$2 xtask=$3
    echo "== machine"
    date -u
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv || true
    find_nvrtc
    export OPDUMP_REQUIRE_GPU=1
    want gpu && step $gpu --test-threads=1 --nocapture
    want dumper && step $dumper --test-threads=1 --nocapture
    # shellcheck disable=SC2086
    want bench && step $xtask bench-stats --device cuda --only cuda ${BENCH_ARGS:-}
    # Nsight Compute on the kernels of the over-1-GiB test: what bounds them.
    if want ncu; then
        local ncu
        ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
        if [ -n "$ncu" ]; then
            # shellcheck disable=SC2086
            step "$ncu" --section SpeedOfLight --section Occupancy --section LaunchStats \
                --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \
                -k regex:opdump_stats $gpu gibibyte --test-threads=1
        else
            echo "== ncu: not found"
        fi
    fi
    if want candle && [ -n "${4:-}" ] && [ -f "$4/candle/run.sh" ]; then
        step bash "$4/candle/run.sh"
    elif want candle && [ -z "${4:-}" ] && command -v nvcc >/dev/null; then
        step cargo test --release -p dump-candle --features cuda --test cuda_model -- --test-threads=1
        step cargo run --release -p dump-candle --features cuda --example cuda_overhead
    elif want candle; then
        echo "== candle: no bundle (DIR/candle) and no nvcc: not run"
    fi
    echo "== all done rc=$rc"
    exit $rc
}

case "${1:-}" in
pack) pack "${2:?pack needs a directory}" ;;
run)
    dir=$(cd "${2:?run needs the directory pack filled}" && pwd)
    [ -n "${OUT:-}" ] && exec > >(tee -a "$OUT/log") 2>&1
    export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-/tmp/opdump-gpu-target}
    run "$dir/bin/gpu" "$dir/bin/cuda_gpu_dumper" "$dir/bin/xtask" "$dir"
    ;;
"")
    cd "$root" || exit 1
    [ -n "${OUT:-}" ] && exec > >(tee -a "$OUT/log") 2>&1
    CARGO_INCREMENTAL=0 cargo build --release -p xtask || exit 1
    run "cargo test --release -p dump-device-cuda --test gpu --" \
        "cargo test --release -p opdump-tests --test cuda_gpu_dumper --" \
        "$root/target/release/xtask"
    ;;
*)
    echo "usage: tools/gpu-check.sh [pack DIR | run DIR]" >&2
    exit 2
    ;;
esac
