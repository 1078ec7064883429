#!/usr/bin/env bash
# Fetches nvcc and the CUDA headers from the pinned PyPI wheels into a cache directory (reused
# if present) and prints the CUDA root to use as CUDA_HOME. Only compiling needs it: candle's
# `cuda` feature (dump-candle's `cuda`) builds its kernels with nvcc in a build script; nothing
# here needs or uses a GPU. No pip install into the system Python: pip installs into the cache.
#
#   export CUDA_HOME="$(adapters/dump-candle/ci/fetch-nvcc.sh)"
#   PATH="$CUDA_HOME/bin:$PATH" CUDA_COMPUTE_CAP=80 cargo clippy -p dump-candle --features cuda
#
# Environment: OPDUMP_NVCC_CACHE overrides the cache directory
# (default ${XDG_CACHE_HOME:-$HOME/.cache}/opdump/nvcc). OPDUMP_CUDA_RELEASE picks the toolkit
# release: 13.5 (the default, what CI compiles with) or 13.0 (PTX that a CUDA 13.0 driver, e.g.
# driver 580, can load: a driver refuses PTX of a newer ISA than it knows). Progress goes to
# stderr; stdout carries only the CUDA root.
set -euo pipefail

release="${OPDUMP_CUDA_RELEASE:-13.5}"
case "$release" in
    13.5) version="13.5.37" cccl="13.3.5.0.6" ;;
    13.0) version="13.0.88" cccl="13.0.85" ;;
    *)
        echo "fetch-nvcc: OPDUMP_CUDA_RELEASE must be 13.5 or 13.0, not '$release'" >&2
        exit 1
        ;;
esac
cache="${OPDUMP_NVCC_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/opdump/nvcc}"
dest="$cache/cuda-$version"
root="$dest/nvidia/cu13"

if [ -x "$root/bin/nvcc" ] && [ -f "$root/include/cuda_runtime.h" ]; then
    echo "$root"
    exit 0
fi
if [ "$(uname -m)" != x86_64 ]; then
    echo "fetch-nvcc: the pinned nvcc wheels are for x86_64, not $(uname -m)" >&2
    exit 1
fi
python=$(command -v python3 || command -v python) || {
    echo "fetch-nvcc: python3 with pip is required" >&2
    exit 1
}
mkdir -p "$cache"
# Install into a temporary directory and rename into place, so an interrupted run never leaves
# a half-installed cache that later runs would trust.
tmp=$(mktemp -d "$cache/.install.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
echo "fetch-nvcc: installing nvidia-cuda-nvcc==$version and the CUDA headers (~350 MB) into $dest" >&2
"$python" -m pip install --quiet --disable-pip-version-check --root-user-action=ignore --no-cache-dir --only-binary=:all: \
    --target "$tmp" "nvidia-cuda-nvcc==$version" "nvidia-cuda-runtime==$version" \
    "nvidia-cuda-crt==$version" "nvidia-nvvm==$version" "nvidia-cuda-cccl==$cccl" >&2
if [ ! -x "$tmp/nvidia/cu13/bin/nvcc" ] || [ ! -f "$tmp/nvidia/cu13/include/cuda_runtime.h" ]; then
    echo "fetch-nvcc: the wheels hold no nvidia/cu13/bin/nvcc or include/cuda_runtime.h" >&2
    exit 1
fi
"$tmp/nvidia/cu13/bin/nvcc" --version >&2
rm -rf "$dest"
mv "$tmp" "$dest"
trap - EXIT
echo "$root"
