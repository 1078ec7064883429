#!/usr/bin/env bash
# Installs msprobe (PyPI mindstudio-probe, pinned to 26.2.0: the version that made
# shared/reference/msprobe_* and that tools/msprobe_e2e.py was checked with, on torch 2.15
# CPU) unless it imports already; torch first (tools/install-torch.sh). Used by .ci/run and
# `cargo xtask test --install` for opdump/tests/msprobe_e2e.rs.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/install-torch.sh
if python3 -c 'from msprobe.pytorch import PrecisionDebugger' >/dev/null 2>&1; then
  exit 0
fi
python3 -m pip install --quiet mindstudio-probe==26.2.0 >&2
python3 -c 'from msprobe.pytorch import PrecisionDebugger; print("msprobe ok")' >&2
