#!/usr/bin/env bash
# Runs the bundle that ci/gpu-bundle.sh builds (copied beside it as run.sh) on a GPU machine
# without Rust: the test binary `cuda_model` with OPDUMP_REQUIRE_GPU=1 (a missing GPU fails),
# then the bench `cuda_overhead` (arguments to this script go to the bench). Prints
# everything; exits 0 only when both pass.
#
# The binaries need the driver's libcuda.so.1 and the CUDA 13 libraries libcudart.so.13,
# libcublas.so.13, libcublasLt.so.13, libcurand.so.10 and libnvrtc.so.13 (with
# libnvrtc-builtins beside it):
# they are looked up in the loader cache, then under /usr/local/cuda*, the Python
# site-packages' nvidia/ folders and finally the whole filesystem (a bounded `find`), and their
# folders put on LD_LIBRARY_PATH. Without the driver's library it stops at once with a message.
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
say() { echo "run.sh: $*"; }

# The binaries: beside this script, or unpacked from the .gz files beside it into a temporary
# folder.
if [ -x "$here/cuda_model" ] && [ -x "$here/cuda_overhead" ]; then
    bin=$here
else
    bin=$(mktemp -d "${TMPDIR:-/tmp}/opdump-candle-gpu.XXXXXX") || exit 2
    trap 'rm -rf "$bin"' EXIT
    for b in cuda_model cuda_overhead; do
        if [ ! -f "$here/$b.gz" ]; then
            say "$here/$b.gz is missing: build the bundle with adapters/dump-candle/ci/gpu-bundle.sh"
            exit 2
        fi
        if command -v gzip >/dev/null 2>&1; then
            gzip -dc "$here/$b.gz" >"$bin/$b"
        else
            python3 -c 'import gzip, shutil, sys; shutil.copyfileobj(gzip.open(sys.argv[1]), open(sys.argv[2], "wb"))' \
                "$here/$b.gz" "$bin/$b"
        fi || {
            say "cannot unpack $here/$b.gz"
            exit 2
        }
        chmod +x "$bin/$b"
    done
fi
[ -f "$here/BUILD-INFO" ] && cat "$here/BUILD-INFO"

if command -v nvidia-smi >/dev/null 2>&1; then
    timeout 60 nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap \
        --format=csv,noheader || say "nvidia-smi failed"
else
    say "nvidia-smi not found"
fi

# Files named exactly $1 (the soname; symlinks count) in the loader cache, the usual places,
# then anywhere: their folders, best first, one a line.
candidates() {
    local name=$1
    ldconfig -p 2>/dev/null | awk -v n="$name" '$1 == n { print $NF }' | xargs -r -n1 dirname 2>/dev/null
    local roots=(/usr/local/cuda* /usr/local/nvidia /usr/lib/x86_64-linux-gnu /usr/lib64)
    local py
    for py in $(command -v python3 python 2>/dev/null); do
        roots+=($("$py" -c 'import site, sys; print(" ".join(site.getsitepackages() + [site.getusersitepackages()]))' 2>/dev/null))
    done
    local r
    for r in "${roots[@]}"; do
        [ -d "$r" ] && timeout 60 find "$r" -name "$name" 2>/dev/null | xargs -r -n1 dirname 2>/dev/null
    done
    if [ -z "${NO_FULL_FIND:-}" ]; then
        timeout 120 find / \( -path /proc -o -path /sys -o -path /dev \) -prune -o -name "$name" -print \
            2>/dev/null | xargs -r -n1 dirname 2>/dev/null
    fi
}

# The first folder holding $1 that is not the link-time stand-in of ci/libcuda-stub.sh.
find_lib() {
    local d
    while read -r d; do
        if [ -e "$d/$1" ] && ! grep -qa "opdump libcuda stand-in" "$d/$1"; then
            echo "$d"
            return 0
        fi
    done < <(NO_FULL_FIND=${2:-} candidates "$1")
    return 1
}

libpath=()
add_dir() {
    local d
    for d in "${libpath[@]}"; do [ "$d" = "$1" ] && return; done
    libpath+=("$1")
}

drv=$(find_lib libcuda.so.1 quick) || drv=$(find_lib libcuda.so.1) || {
    say "no NVIDIA driver: libcuda.so.1 not found (no GPU here?); nothing run"
    exit 2
}
say "driver library: $drv/libcuda.so.1"
add_dir "$drv"

missing=0
for lib in libcudart.so.13 libcublas.so.13 libcublasLt.so.13 libcurand.so.10 libnvrtc.so.13; do
    # cuBLASLt from cuBLAS's folder when it is there: the two must be of one release.
    if [ "$lib" = libcublasLt.so.13 ] && [ -n "${cublas_dir:-}" ] && [ -e "$cublas_dir/$lib" ]; then
        d=$cublas_dir
    else
        d=$(find_lib "$lib" quick) || d=$(find_lib "$lib") || {
            say "$lib not found"
            missing=1
            continue
        }
    fi
    [ "$lib" = libcublas.so.13 ] && cublas_dir=$d
    say "$lib: $d"
    add_dir "$d"
done
if [ "$missing" = 1 ]; then
    say "CUDA 13 libraries are missing (install the nvidia-*-cu13 wheels or the CUDA 13 toolkit); nothing run"
    exit 2
fi

LD_LIBRARY_PATH=$(
    IFS=:
    echo "${libpath[*]}"
)${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export LD_LIBRARY_PATH
say "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
if ldd "$bin/cuda_model" | grep -E 'not found'; then
    say "the test binary's libraries do not all resolve (above); nothing run"
    exit 2
fi
ldd "$bin/cuda_model" | grep -E 'libcuda|cublas|curand|nvrtc'

cd "$bin" || exit 2
say "test: OPDUMP_REQUIRE_GPU=1 ./cuda_model --test-threads=1 --nocapture"
OPDUMP_REQUIRE_GPU=1 timeout 900 ./cuda_model --test-threads=1 --nocapture
test_rc=$?
say "test exit status $test_rc"

say "bench: ./cuda_overhead $*"
timeout 900 ./cuda_overhead "$@"
bench_rc=$?
say "bench exit status $bench_rc"

if [ "$test_rc" = 0 ] && [ "$bench_rc" = 0 ]; then
    say "PASS"
    exit 0
fi
say "FAIL (test $test_rc, bench $bench_rc)"
exit 1
