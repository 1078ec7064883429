"""Fixtures of the MindSpore end-to-end test (opdump/tests/mindspore_e2e.rs): a small CNN built
twice with the same fixed weights, once in MindSpore (graph mode, CPU) and dumped by
MindSpore's own e2e Dump, once in PyTorch and exported to ONNX, so that `opdump compare` can
pair MindSpore's kernel names (`Default/features-SequentialCell/0-Conv2d/BiasAdd-op0`) with
the ONNX nodes of an `opdump run`.

The network: conv1 (Conv2d 1->4, 3x3, bias) -> relu -> pool (MaxPool 2x2) -> features
(a SequentialCell / nn.Sequential: Conv2d 4->8 3x3 with bias, ReLU, MaxPool 2x2, so the cell
paths nest) -> flatten -> fc (Dense / Linear 128->10). Weights are drawn once from
numpy.random.RandomState(22) and loaded into both frameworks; the input (1x1x16x16 float32)
from RandomState(2210).

Pinned: mindspore 2.10.0 (`python3 -m pip install mindspore==2.10.0`, the version that made
shared/reference/), torch 2.15 CPU, onnx and onnxscript (tools/install-torch.sh), numpy 2.

Usage: python3 tools/mindspore_e2e.py OUT_DIR
Writes into OUT_DIR:
  input.npy                the input x (1x1x16x16 float32)
  weights.npz              the weights both frameworks use, by torch parameter name
  ms_dump/                 MindSpore 2.10.0's e2e dump of one forward step (GRAPH_MODE, CPU;
                           dump_mode 0, saved_data tensor, input_output 0, iteration 0,
                           net_name Net): rank_0/Net/0/0/*.npy, graphs/, execution_order/
  ms_output.npy            MindSpore's network output
  ts.onnx                  torch.onnx.export(dynamo=False)
  dynamo.onnx              torch.onnx.export with the default (dynamo) exporter
  ts_perturbed.onnx        ts.onnx with PERTURBED's conv weight x1.01
  dynamo_perturbed.onnx    dynamo.onnx with the same weight x1.01
  expected.json            the perturbed module, the perturbed ONNX node of each export, and
                           MindSpore's forward kernel outputs (by op type, and how many)
The script checks that MindSpore's and torch's outputs agree (max abs diff < 1e-4) and exits
non-zero otherwise.
"""
import json
import os
import shutil
import subprocess
import sys

import numpy as np

PERTURBED = "features.0"
SHAPES = {
    "conv1.weight": (4, 1, 3, 3),
    "conv1.bias": (4,),
    "features.0.weight": (8, 4, 3, 3),
    "features.0.bias": (8,),
    "fc.weight": (10, 128),
    "fc.bias": (10,),
}


def weights():
    rng = np.random.RandomState(22)
    out = {}
    for name, shape in SHAPES.items():
        fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else 4
        out[name] = (rng.uniform(-1.0, 1.0, shape) / np.sqrt(fan_in)).astype(np.float32)
    return out


def mindspore_dump(out_dir):
    """Runs in its own process, MINDSPORE_DUMP_CONFIG set by the parent."""
    import mindspore as ms
    from mindspore import Tensor, nn

    class Net(nn.Cell):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(1, 4, 3, pad_mode="pad", padding=1, has_bias=True)
            self.relu = nn.ReLU()
            self.pool = nn.MaxPool2d(kernel_size=2, stride=2)
            self.features = nn.SequentialCell(
                [
                    nn.Conv2d(4, 8, 3, pad_mode="pad", padding=1, has_bias=True),
                    nn.ReLU(),
                    nn.MaxPool2d(kernel_size=2, stride=2),
                ]
            )
            self.flatten = nn.Flatten()
            self.fc = nn.Dense(128, 10)

        def construct(self, x):
            x = self.pool(self.relu(self.conv1(x)))
            x = self.features(x)
            return self.fc(self.flatten(x))

    ms.set_context(mode=ms.GRAPH_MODE)
    ms.set_device("CPU")
    net = Net()
    w = dict(np.load(os.path.join(out_dir, "weights.npz")))
    params = {p.name: p for p in net.get_parameters()}
    assert sorted(params) == sorted(w), (sorted(params), sorted(w))
    for name, value in w.items():
        params[name].set_data(Tensor(value))
    x = Tensor(np.load(os.path.join(out_dir, "input.npy")))
    y = net(x).asnumpy()
    np.save(os.path.join(out_dir, "ms_output.npy"), y)


def torch_net(w):
    """The same network in torch, with the weights `w`."""
    import torch
    import torch.nn as nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(1, 4, 3, padding=1)
            self.relu = nn.ReLU()
            self.pool = nn.MaxPool2d(2, 2)
            self.features = nn.Sequential(
                nn.Conv2d(4, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2, 2)
            )
            self.flatten = nn.Flatten()
            self.fc = nn.Linear(128, 10)

        def forward(self, x):
            x = self.pool(self.relu(self.conv1(x)))
            x = self.features(x)
            return self.fc(self.flatten(x))

    net = Net().eval()
    state = {k: torch.from_numpy(v) for k, v in w.items()}
    net.load_state_dict(state, strict=True)
    return net


def perturb(src, dst, scope):
    """Copies src with the weight of the Conv node of torch module `scope` x1.01; returns the
    node's name."""
    import onnx
    from onnx import numpy_helper

    m = onnx.load(src)
    inits = {i.name: i for i in m.graph.initializer}
    # TorchScript names a node by its module scopes: `/features/features.0/Conv`.
    ts_scopes = ("/" + scope.replace(".", "/") + "/", "/" + scope + "/")
    for n in m.graph.node:
        if n.op_type != "Conv":
            continue
        meta = {p.key: p.value for p in n.metadata_props}
        scopes = meta.get("pkg.torch.onnx.name_scopes", "")
        if f"'{scope}'" in scopes or any(s in n.name for s in ts_scopes):
            w = inits[n.input[1]]
            a = numpy_helper.to_array(w) * np.float32(1.01)
            w.CopyFrom(numpy_helper.from_array(a.astype(np.float32), w.name))
            onnx.save(m, dst)
            return n.name
    raise SystemExit(f"{src}: no Conv node of {scope}")


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--mindspore":
        mindspore_dump(sys.argv[2])
        return
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    out = os.path.abspath(sys.argv[1])
    os.makedirs(out, exist_ok=True)
    p = lambda n: os.path.join(out, n)  # noqa: E731
    w = weights()
    np.savez(p("weights.npz"), **w)
    x = (np.random.RandomState(2210).randn(1, 1, 16, 16)).astype(np.float32)
    np.save(p("input.npy"), x)

    # MindSpore: one forward step dumped by its own e2e Dump.
    dump = p("ms_dump")
    shutil.rmtree(dump, ignore_errors=True)
    cfg = {
        "common_dump_settings": {
            "dump_mode": 0,
            "path": dump,
            "net_name": "Net",
            "iteration": "0",
            "saved_data": "tensor",
            "input_output": 0,
            "kernels": [],
            "support_device": [0],
        },
        "e2e_dump_settings": {"enable": True, "trans_flag": True},
    }
    cfg_path = p("ms_dump.config.json")
    with open(cfg_path, "w") as f:
        json.dump(cfg, f, indent=1)
    env = dict(os.environ, MINDSPORE_DUMP_CONFIG=cfg_path, GLOG_v="3")
    subprocess.run([sys.executable, __file__, "--mindspore", out], check=True, env=env)
    os.remove(cfg_path)

    # torch: the same network, the same weights; both exporters.
    import torch

    net = torch_net(w)
    with torch.no_grad():
        y = net(torch.from_numpy(x)).numpy()
    diff = float(np.abs(y - np.load(p("ms_output.npy"))).max())
    print(f"max |torch - mindspore| = {diff:.3g}")
    if not diff < 1e-4:
        raise SystemExit(f"torch and MindSpore disagree: {diff}")
    tx = torch.from_numpy(x)
    torch.onnx.export(net, (tx,), p("ts.onnx"), input_names=["x"], dynamo=False)
    torch.onnx.export(net, (tx,), p("dynamo.onnx"), input_names=["x"], external_data=False)
    for f in os.listdir(out):
        if f.endswith(".onnx.data"):
            raise SystemExit(f"{f}: the export wrote external data")
    nodes = {
        "ts": perturb(p("ts.onnx"), p("ts_perturbed.onnx"), PERTURBED),
        "dynamo": perturb(p("dynamo.onnx"), p("dynamo_perturbed.onnx"), PERTURBED),
    }

    # MindSpore's forward kernel outputs (Parameters are not kernels).
    outputs = {}
    for root, _, files in os.walk(dump):
        for f in files:
            if f.endswith(".npy") and ".output." in f and not f.startswith("Parameter."):
                op_type = f.split(".", 1)[0]
                outputs[op_type] = outputs.get(op_type, 0) + 1
    with open(p("expected.json"), "w") as f:
        json.dump(
            {
                "perturbed_module": PERTURBED,
                "perturbed_nodes": nodes,
                "mindspore_forward_outputs": sum(outputs.values()),
                "mindspore_outputs_by_type": dict(sorted(outputs.items())),
                "max_abs_diff_torch_mindspore": diff,
            },
            f,
            indent=1,
        )


if __name__ == "__main__":
    main()
