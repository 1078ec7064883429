#!/usr/bin/env python3
"""Regenerates the ONNX backend node tests from the pinned `onnx` wheel, as `.npy` files.

    python3 -m pip install -r tools/node_suite.requirements.txt
    python3 tools/node_suite.py OUT_DIR

The wheel's node test cases (`onnx.backend.test.case.node.collect_testcases()`, the cases
ONNX's own backend test data is made from) are written, one folder per test, as:

  OUT_DIR/{test}/model.onnx            the test's model
  OUT_DIR/{test}/inputs/{j}.npy        input j of data set 0 (numpy; ml_dtypes for bfloat16,
                                       float8 and int4, saved as numpy saves them)
  OUT_DIR/{test}/expected/{name}.npy   each graph output, named by its ONNX value name
  OUT_DIR/manifest.tsv                 test, input names (comma-separated, in order), output
                                       names, and `skip:<why>` for tests opdump cannot feed
                                       (sequence, map or optional inputs or outputs, value
                                       names that are no file names)

`cargo xtask node-suite --dir OUT_DIR` runs every test through each runtime (docs: README,
"The ONNX backend node suite"). The onnx version is pinned (ONNX_VERSION below): another
version makes other tests, so the script refuses it unless --any-version is given.
Reproducible: the test cases use fixed seeds.
"""

import argparse
import os
import re
import shutil
import sys

import numpy as np
import onnx
from onnx import numpy_helper

ONNX_VERSION = "1.23.2"
NAME_OK = re.compile(r"^[A-Za-z0-9_.\-]+$")


def kind_of(value_info):
    t = value_info.type
    for k in ("tensor_type", "sequence_type", "map_type", "optional_type", "sparse_tensor_type"):
        if t.HasField(k):
            return k
    return "unknown"


def as_array(v):
    """A C-order array (numpy saves a transposed view in Fortran order, which `opdump run`
    refuses as an input and `opdump compare` does not pair with a C-order dump)."""
    if isinstance(v, onnx.TensorProto):
        v = numpy_helper.to_array(v)
    return np.array(v, order="C", copy=True)  # ascontiguousarray would make 0-d arrays 1-d


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("out_dir")
    p.add_argument("--any-version", action="store_true")
    a = p.parse_args()
    if onnx.__version__ != ONNX_VERSION and not a.any_version:
        sys.exit(
            f"onnx {onnx.__version__} is installed; the suite is pinned to {ONNX_VERSION} "
            f"(python3 -m pip install onnx=={ONNX_VERSION}, or pass --any-version)"
        )
    from onnx.backend.test.case import node

    cases = [c for c in node.collect_testcases() if c.kind == "node"]
    if os.path.exists(a.out_dir):
        shutil.rmtree(a.out_dir)
    os.makedirs(a.out_dir)
    rows = []
    for case in sorted(cases, key=lambda c: c.name):
        d = os.path.join(a.out_dir, case.name)
        os.makedirs(os.path.join(d, "inputs"))
        os.makedirs(os.path.join(d, "expected"))
        with open(os.path.join(d, "model.onnx"), "wb") as f:
            f.write(case.model.SerializeToString())
        g = case.model.graph
        inputs, outputs = case.data_sets[0]
        skip = ""
        kinds = {kind_of(v) for v in list(g.input) + list(g.output)}
        if kinds != {"tensor_type"}:
            skip = "skip:" + "+".join(sorted(k for k in kinds if k != "tensor_type"))
        names_in = [v.name for v in g.input]
        names_out = [v.name for v in g.output]
        if not skip and not all(NAME_OK.match(n) for n in names_in + names_out):
            skip = "skip:value names that are no file names"
        if not skip:
            for j, x in enumerate(inputs):
                np.save(os.path.join(d, "inputs", f"{j}.npy"), as_array(x))
            for name, y in zip(names_out, outputs):
                np.save(os.path.join(d, "expected", f"{name}.npy"), as_array(y))
        rows.append("\t".join([case.name, ",".join(names_in), ",".join(names_out), skip]))
    with open(os.path.join(a.out_dir, "manifest.tsv"), "w") as f:
        f.write(f"# onnx {onnx.__version__} node tests: test, inputs, outputs, skip\n")
        f.write("\n".join(rows) + "\n")
    skipped = sum(1 for r in rows if "\tskip:" in r)
    print(f"{len(rows)} node tests from onnx {onnx.__version__} in {a.out_dir} ({skipped} opdump cannot feed)")


if __name__ == "__main__":
    main()
