#!/usr/bin/env bash
# Builds dump-candle's CUDA test (`tests/cuda_model.rs`) and bench (`examples/cuda_overhead.rs`)
# in release mode on a machine without a GPU or CUDA toolkit, for a GPU machine without Rust,
# and puts them with ci/gpu-run.sh (as run.sh) into OUTDIR:
#
#   adapters/dump-candle/ci/gpu-bundle.sh OUTDIR      # then, there: OUTDIR/run.sh
#
# - nvcc and the CUDA headers of release OPDUMP_CUDA_RELEASE (default 13.0: PTX that a CUDA 13.0
#   driver, e.g. driver 580, loads) from PyPI (ci/fetch-nvcc.sh); candle's kernels are compiled
#   for CUDA_COMPUTE_CAP (default 90: H100/H200).
# - cuBLAS, cuBLASLt, cuRAND and NVRTC of that release from their PyPI wheels, for the link only
#   (the binaries record their sonames: libcublas.so.13, libcublasLt.so.13, libcurand.so.10,
#   libnvrtc.so.13, and libcudart.so.13 from the nvcc wheels, which candle's statically
#   compiled kernels need; run.sh finds them where they run).
# - libcuda (the driver's library, on no registry): a stand-in with the soname libcuda.so.1
#   made by ci/libcuda-stub.sh from the driver symbols the link reports undefined (linking
#   until none is), so the binaries load the real driver's library there.
# Checks with readelf that the binaries need those sonames, strips and gzips them, and writes
# BUILD-INFO.
# Needs python3 with pip, unzip, cc, nm, readelf and strip.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
bundle="${1:?usage: gpu-bundle.sh OUTDIR}"
release="${OPDUMP_CUDA_RELEASE:-13.0}"
export CUDA_COMPUTE_CAP="${CUDA_COMPUTE_CAP:-90}"
cache="${OPDUMP_NVCC_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/opdump/nvcc}"
case "$release" in
    13.0) pins=(nvidia-cublas==13.0.2.14 nvidia-curand==10.4.0.35 nvidia-cuda-nvrtc==13.0.88) ;;
    *)
        echo "gpu-bundle: link libraries are pinned for OPDUMP_CUDA_RELEASE=13.0 only, not '$release'" >&2
        exit 1
        ;;
esac

CUDA_HOME="$(OPDUMP_CUDA_RELEASE="$release" bash "$here/fetch-nvcc.sh")"
export CUDA_HOME PATH="$CUDA_HOME/bin:$PATH"

libs="$cache/link-libs-$release"
if [ ! -f "$libs/.complete" ]; then
    echo "gpu-bundle: fetching ${pins[*]} (~570 MB of wheels) for the link" >&2
    rm -rf "$libs"
    mkdir -p "$libs"
    wheels=$(mktemp -d)
    trap 'rm -rf "$wheels"' EXIT
    python3 -m pip download --quiet --disable-pip-version-check --no-deps --only-binary=:all: \
        --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
        --platform manylinux2014_x86_64 --platform manylinux_2_12_x86_64 \
        --platform manylinux2010_x86_64 -d "$wheels" "${pins[@]}" >&2
    for w in "$wheels"/*.whl; do
        unzip -q -o -j "$w" 'nvidia/*/lib/libcublas.so.*' 'nvidia/*/lib/libcublasLt.so.*' \
            'nvidia/*/lib/libcurand.so.*' 'nvidia/*/lib/libnvrtc.so.*' -d "$libs" 2>/dev/null || true
    done
    for l in cublas cublasLt curand nvrtc; do
        so=$(cd "$libs" && ls "lib$l.so."* 2>/dev/null | head -n1)
        [ -n "$so" ] || {
            echo "gpu-bundle: no lib$l.so.* in the wheels" >&2
            exit 1
        }
        ln -sf "$so" "$libs/lib$l.so"
    done
    rm -rf "$wheels"
    trap - EXIT
    touch "$libs/.complete"
fi

# candle-kernels links its statically compiled kernels against the CUDA runtime (-lcudart):
# the one of the nvcc wheels.
ln -sf "$CUDA_HOME/lib/libcudart.so.13" "$libs/libcudart.so"

target="${CARGO_TARGET_DIR:-$root/target}"
stub="$target/libcuda-stub"
mkdir -p "$stub"
[ -f "$stub/libcuda.so" ] || bash "$here/libcuda-stub.sh" "$stub"

cd "$root"
build() {
    LIBRARY_PATH="$libs:$stub${LIBRARY_PATH:+:$LIBRARY_PATH}" CARGO_INCREMENTAL=0 \
        cargo build --release -p dump-candle --features cuda --test cuda_model \
        --example cuda_overhead --message-format=json-render-diagnostics \
        >"$stub/artifacts.json" 2>"$stub/build.log"
}
linked=0
for attempt in 1 2 3; do
    if build; then
        linked=1
        break
    fi
    if ! grep -qE "(undefined reference to .|undefined symbol: )cu[A-Z]" "$stub/build.log"; then
        break
    fi
    # The linker names the driver symbols it missed (up to its error limit); the crates that
    # call the driver name all they reference (`nm -u` of their rlibs): a superset.
    echo "gpu-bundle: link $attempt: adding the driver symbols it missed to the stand-in" >&2
    nm -u "$target"/release/deps/lib{cudarc,candle_core,candle_nn,dump_device_cuda,dump_candle}-*.rlib \
        >"$stub/rlib-undefined.txt" 2>/dev/null || true
    bash "$here/libcuda-stub.sh" "$stub" "$stub/symbols.txt" "$stub/build.log" "$stub/rlib-undefined.txt"
done
if [ "$linked" != 1 ]; then
    tail -n 60 "$stub/build.log" >&2
    echo "gpu-bundle: the build failed (log: $stub/build.log)" >&2
    exit 1
fi

# The executables cargo reported, by target name.
exe() {
    python3 - "$stub/artifacts.json" "$1" <<'EOF'
import json, sys
path, name = sys.argv[1], sys.argv[2]
found = [m["executable"] for m in map(json.loads, open(path))
         if m.get("reason") == "compiler-artifact" and m.get("executable")
         and m["target"]["name"] == name]
if not found:
    sys.exit(f"gpu-bundle: cargo reported no executable {name}")
print(found[-1])
EOF
}
test_bin=$(exe cuda_model)
bench_bin=$(exe cuda_overhead)

for b in "$test_bin" "$bench_bin"; do
    needed=$(readelf -d "$b" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | sort | tr '\n' ' ')
    echo "gpu-bundle: $(basename "$b") needs: $needed" >&2
    # (libcublasLt.so.13 is libcublas's own need, not the binaries'.)
    for so in libcuda.so.1 libcudart.so.13 libcublas.so.13 libcurand.so.10 libnvrtc.so.13; do
        case " $needed " in
            *" $so "*) ;;
            *)
                echo "gpu-bundle: $b does not need $so" >&2
                exit 1
                ;;
        esac
    done
    if readelf -d "$b" | grep -qE 'RPATH|RUNPATH'; then
        echo "gpu-bundle: $b has a run path (build-machine folders would leak into it)" >&2
        exit 1
    fi
done

# Stripped and gzipped (candle's kernels make each binary ~50 MB: ~32 MB of sm_90a cubins and
# ~8 MB of PTX; gzip takes that to ~13 MB); run.sh unpacks them.
mkdir -p "$bundle"
rm -f "$bundle/cuda_model" "$bundle/cuda_overhead"
work=$(mktemp -d)
cp "$test_bin" "$work/cuda_model"
cp "$bench_bin" "$work/cuda_overhead"
strip "$work/cuda_model" "$work/cuda_overhead"
gzip -9 -c "$work/cuda_model" >"$bundle/cuda_model.gz"
gzip -9 -c "$work/cuda_overhead" >"$bundle/cuda_overhead.gz"
cp "$here/gpu-run.sh" "$bundle/run.sh"
chmod +x "$bundle/run.sh"
{
    echo "built: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "commit: $(git -C "$root" rev-parse HEAD)$(git -C "$root" diff --quiet HEAD -- . || echo ' (with uncommitted changes)')"
    echo "nvcc: $("$CUDA_HOME/bin/nvcc" --version | tail -n1)"
    echo "CUDA_COMPUTE_CAP: $CUDA_COMPUTE_CAP"
    echo "link libraries: ${pins[*]}; libcuda.so.1: stand-in with $(wc -l <"$stub/symbols.txt") driver symbols"
    echo "cuda_model needs: $(readelf -d "$work/cuda_model" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' ')"
    (cd "$work" && sha256sum cuda_model cuda_overhead)
} >"$bundle/BUILD-INFO"
rm -rf "$work"
du -sh "$bundle" >&2
echo "$bundle"
