#!/usr/bin/env bash
# Fetches the pinned NVRTC wheel from PyPI into a cache directory (reused if present), unpacks
# it and prints the directory holding libnvrtc.so.12. No GPU, driver or CUDA toolkit needed.
#
#   export OPDUMP_NVRTC_LIB_DIR="$(dump-device-cuda/ci/fetch-nvrtc.sh)"
#
# Environment: OPDUMP_NVRTC_CACHE overrides the cache directory
# (default ${XDG_CACHE_HOME:-$HOME/.cache}/opdump/nvrtc). Progress goes to stderr; stdout
# carries only the library directory.
set -euo pipefail

version="12.8.93"
package="nvidia-cuda-nvrtc-cu12"
cache="${OPDUMP_NVRTC_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/opdump/nvrtc}"
dest="$cache/$package-$version"
lib="$dest/nvidia/cuda_nvrtc/lib"

if [ -f "$lib/libnvrtc.so.12" ]; then
    echo "$lib"
    exit 0
fi

mkdir -p "$cache"
python=$(command -v python3 || command -v python) || {
    echo "fetch-nvrtc: python3 with pip is required" >&2
    exit 1
}
wheels="$cache/wheels"
mkdir -p "$wheels"
if ! ls "$wheels"/nvidia_cuda_nvrtc_cu12-"$version"-*.whl >/dev/null 2>&1; then
    echo "fetch-nvrtc: downloading $package==$version (~88 MB) into $wheels" >&2
    "$python" -m pip download --quiet --no-deps --only-binary=:all: \
        --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 \
        --dest "$wheels" "$package==$version" >&2
fi
wheel=$(ls "$wheels"/nvidia_cuda_nvrtc_cu12-"$version"-*.whl | head -n 1)

# Unpack into a temporary directory and rename into place, so an interrupted run never leaves
# a half-unpacked cache that later runs would trust.
tmp=$(mktemp -d "$cache/.unpack.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
"$python" -m zipfile -e "$wheel" "$tmp" >&2
if [ ! -f "$tmp/nvidia/cuda_nvrtc/lib/libnvrtc.so.12" ]; then
    echo "fetch-nvrtc: $wheel holds no nvidia/cuda_nvrtc/lib/libnvrtc.so.12" >&2
    exit 1
fi
rm -rf "$dest"
mv "$tmp" "$dest"
trap - EXIT
echo "$lib"
