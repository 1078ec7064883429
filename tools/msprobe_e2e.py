"""Fixtures of the msprobe end-to-end test (opdump/tests/msprobe_e2e.rs): a small PyTorch CNN
(stem conv + BatchNorm, two residual blocks with BatchNorm, a strided conv, global average
pool, two Linear layers; random weights, seed 7) dumped by real msprobe and exported to ONNX.

Pinned: mindstudio-probe 26.2.0 (the version that made shared/reference/msprobe_*), with the
torch 2.15 CPU, onnx and onnxscript of tools/install-torch.sh; `python3 -m pip install
mindstudio-probe==26.2.0`.

Usage: python3 tools/msprobe_e2e.py OUT_DIR
Writes into OUT_DIR:
  input.npy                       the input (1x3x16x16 float32)
  dynamo.onnx                     torch.onnx.export defaults (dynamo): BatchNorm folded into Conv
  dynamo_bn.onnx                  dynamo with optimize=False: BatchNorm kept
  ts.onnx                         dynamo=False defaults (constant folding: BatchNorm folded)
  ts_bn.onnx                      dynamo=False, do_constant_folding=False: BatchNorm kept
  dynamo_perturbed.onnx           dynamo.onnx with one weight x1.01 (PERTURBED's conv)
  ts_perturbed.onnx               ts.onnx with the same weight x1.01
  hooks.npz                       every leaf module's output by module name (tools/torch_hook_npz.py)
  msprobe/{L0,L1,mix}_{statistics,tensor}/   msprobe dumps (forward only, one step)
  expected.json                   what the test checks against (the perturbed module, the counts)
"""
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import onnx
import torch
import torch.nn as nn
import torch.nn.functional as F
from onnx import numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_hook_npz import save_activations  # noqa: E402

PERTURBED = "block2.conv2"


class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.conv1 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(c)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(c)

    def forward(self, x):
        y = self.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        y += x
        return self.relu(y)


class SmallCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 8, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(8)
        self.block1 = Block(8)
        self.down = nn.Conv2d(8, 16, 3, stride=2, padding=1)
        self.block2 = Block(16)
        self.fc1 = nn.Linear(16, 32)
        self.fc2 = nn.Linear(32, 10)

    def forward(self, x):
        x = F.relu(self.bn(self.stem(x)))
        x = self.block1(x)
        x = F.relu(self.down(x))
        x = self.block2(x)
        x = torch.flatten(F.adaptive_avg_pool2d(x, 1), 1)
        return self.fc2(F.relu(self.fc1(x)))


def model():
    torch.manual_seed(7)
    m = SmallCNN()
    # Non-trivial running statistics, so that a folded BatchNorm changes the values.
    for mod in m.modules():
        if isinstance(mod, nn.BatchNorm2d):
            mod.running_mean.uniform_(-0.2, 0.2)
            mod.running_var.uniform_(0.5, 1.5)
            mod.weight.data.uniform_(0.5, 1.5)
            mod.bias.data.uniform_(-0.1, 0.1)
    return m.eval()


def perturb(src, dst, scope):
    """Copies src with the weight of the Conv node of module `scope` x1.01."""
    m = onnx.load(src)
    inits = {i.name: i for i in m.graph.initializer}
    for n in m.graph.node:
        if n.op_type != "Conv":
            continue
        meta = {p.key: p.value for p in n.metadata_props}
        scopes = meta.get("pkg.torch.onnx.name_scopes", "")
        ts = "/" + scope.replace(".", "/") + "/"
        # dynamo: the folded conv carries its BatchNorm's scope (block2.bn2)
        bn_scope = scope.replace("conv", "bn")
        if f"'{scope}'" in scopes or f"'{bn_scope}'" in scopes or n.name.startswith(ts):
            w = inits[n.input[1]]
            a = numpy_helper.to_array(w) * np.float32(1.01)
            w.CopyFrom(numpy_helper.from_array(a.astype(np.float32), w.name))
            onnx.save(m, dst)
            return n.name
    raise SystemExit(f"{src}: no Conv node of {scope}")


def msprobe_dump(net, x, out, level, task):
    from msprobe.pytorch import PrecisionDebugger

    cfg = {
        "task": task,
        "dump_path": out,
        "rank": [],
        "step": [0],
        "level": level,
        "async_dump": False,
        task: {"scope": [], "list": [], "data_mode": ["forward"]},
    }
    if task == "statistics":
        cfg[task]["summary_mode"] = "statistics"
    path = out + ".config.json"
    with open(path, "w") as f:
        json.dump(cfg, f)
    dbg = PrecisionDebugger(config_path=path)
    dbg.start(model=net)
    with torch.no_grad():
        net(x)
    dbg.stop()
    dbg.step()
    os.remove(path)


def main():
    if sys.argv[1] == "--msprobe":
        # One dump per process: PrecisionDebugger is a per-process singleton.
        _, _, out, level, task, x = sys.argv
        msprobe_dump(model(), torch.from_numpy(np.load(x)), out, level, task)
        return
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    net = model()
    torch.manual_seed(1)
    x = torch.randn(1, 3, 16, 16)
    np.save(os.path.join(out, "input.npy"), x.numpy())
    p = lambda n: os.path.join(out, n)  # noqa: E731
    torch.onnx.export(net, (x,), p("dynamo.onnx"), input_names=["x"])
    torch.onnx.export(net, (x,), p("dynamo_bn.onnx"), input_names=["x"], optimize=False)
    torch.onnx.export(net, (x,), p("ts.onnx"), input_names=["x"], dynamo=False)
    torch.onnx.export(
        net,
        (x,),
        p("ts_bn.onnx"),
        input_names=["x"],
        dynamo=False,
        do_constant_folding=False,
    )
    net.eval()
    nodes = {
        "dynamo": perturb(p("dynamo.onnx"), p("dynamo_perturbed.onnx"), PERTURBED),
        "ts": perturb(p("ts.onnx"), p("ts_perturbed.onnx"), PERTURBED),
    }
    save_activations(net, x, p("hooks.npz"))
    dumps = p("msprobe")
    shutil.rmtree(dumps, ignore_errors=True)
    os.makedirs(dumps)
    for level in ["L0", "L1", "mix"]:
        for task in ["statistics", "tensor"]:
            d = os.path.join(dumps, f"{level}_{task}")
            subprocess.run(
                [sys.executable, __file__, "--msprobe", d, level, task, p("input.npy")],
                check=True,
            )
    with open(p("expected.json"), "w") as f:
        json.dump({"perturbed_module": PERTURBED, "perturbed_nodes": nodes}, f, indent=1)


if __name__ == "__main__":
    main()
