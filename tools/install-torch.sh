#!/usr/bin/env bash
# Installs tools/export_models.requirements.txt (torch, torchvision, onnx, onnxscript) unless
# they import already: CPU wheels from download.pytorch.org when it is reachable (a fraction of
# PyPI's CUDA build), PyPI's otherwise. Used by .ci/run and `cargo xtask test --install`.
set -euo pipefail
cd "$(dirname "$0")/.."
if python3 -c 'import torch, torchvision, onnx, onnxscript' >/dev/null 2>&1; then
  exit 0
fi
req=tools/export_models.requirements.txt
# One quick try of download.pytorch.org (pip otherwise retries every file five times when the
# host is unreachable, which cost minutes on machines that reach PyPI only).
python3 -m pip install --quiet --retries 0 --timeout 10 -r "$req" \
    --index-url https://download.pytorch.org/whl/cpu --extra-index-url https://pypi.org/simple >&2 \
  || python3 -m pip install --quiet -r "$req" >&2
python3 -c 'import torch, torchvision, onnx, onnxscript; print("torch", torch.__version__)' >&2
