#!/usr/bin/env bash
# Fetches the pinned onnxruntime wheel from PyPI into a cache directory (reused if present),
# unpacks it and prints the path of libonnxruntime.so.* inside it. No build, no pip install
# into the system Python: the wheel is only unpacked.
#
#   export ORT_DYLIB_PATH="$(adapters/dump-ort/ci/fetch-ort.sh)"
#
# Environment: OPDUMP_ORT_CACHE overrides the cache directory
# (default ${XDG_CACHE_HOME:-$HOME/.cache}/opdump/onnxruntime). Progress goes to stderr;
# stdout carries only the library path.
set -euo pipefail

version="1.31.1"
package="onnxruntime"
cache="${OPDUMP_ORT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/opdump/onnxruntime}"
dest="$cache/$package-$version"
lib="$dest/onnxruntime/capi/libonnxruntime.so.$version"

if [ -f "$lib" ]; then
    echo "$lib"
    exit 0
fi

mkdir -p "$cache"
python=$(command -v python3 || command -v python) || {
    echo "fetch-ort: python3 with pip is required" >&2
    exit 1
}
case "$(uname -m)" in
    x86_64) platforms=(--platform manylinux_2_27_x86_64 --platform manylinux_2_28_x86_64) ;;
    aarch64) platforms=(--platform manylinux_2_27_aarch64 --platform manylinux_2_28_aarch64) ;;
    *)
        echo "fetch-ort: no onnxruntime wheel for $(uname -m)" >&2
        exit 1
        ;;
esac
pyver=$("$python" -c 'import sys; print(f"{sys.version_info[0]}{sys.version_info[1]}")')
wheels="$cache/wheels"
mkdir -p "$wheels"
if ! ls "$wheels"/onnxruntime-"$version"-*.whl >/dev/null 2>&1; then
    echo "fetch-ort: downloading $package==$version (~17 MB) into $wheels" >&2
    "$python" -m pip download --quiet --no-deps --only-binary=:all: "${platforms[@]}" \
        --python-version "$pyver" --dest "$wheels" "$package==$version" >&2
fi
wheel=$(ls "$wheels"/onnxruntime-"$version"-*.whl | head -n 1)

# Unpack into a temporary directory and rename into place, so an interrupted run never leaves
# a half-unpacked cache that later runs would trust.
tmp=$(mktemp -d "$cache/.unpack.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
"$python" -m zipfile -e "$wheel" "$tmp" >&2
if [ ! -f "$tmp/onnxruntime/capi/libonnxruntime.so.$version" ]; then
    echo "fetch-ort: $wheel holds no onnxruntime/capi/libonnxruntime.so.$version" >&2
    exit 1
fi
rm -rf "$dest"
mv "$tmp" "$dest"
trap - EXIT
echo "$lib"
