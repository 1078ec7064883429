"""Fixture of the msprobe training-view test (dump-read/tests/msprobe_training.rs): a small
PyTorch MLP trained by plain SGD for a few steps with a learning rate that makes it diverge,
dumped by real msprobe (L0, statistics, forward and backward), so dump.json holds
`Module.{path}.{Class}.parameters_grad` entries for every step.

Pinned: mindstudio-probe 26.2.0 with the torch 2.15 CPU of tools/install-torch.sh.

Usage: python3 tools/msprobe_train.py OUT_DIR
Writes into OUT_DIR:
  dump/step{N}/rank/dump.json (+ stack.json, construct.json)   msprobe's dump of steps 0..STEPS-1
  expected.json   torch's own gradient L2 norm per parameter (`fc1.weight`, ...) and step,
                  computed in the same run from `p.grad` after `loss.backward()`: `grad_norm`
                  in float32 as msprobe computes it, `grad_norm_f64` in float64 ("nan"/"inf"
                  where it is not finite)
"""
import json
import os
import shutil
import sys

import torch
import torch.nn as nn

STEPS = 5
LR = 40.0  # diverges: the gradient norms grow by orders of magnitude, then overflow


class Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(8, 16)
        self.act = nn.ReLU()
        self.fc2 = nn.Linear(16, 4)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


def main():
    out = sys.argv[1]
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    from msprobe.pytorch import PrecisionDebugger

    torch.manual_seed(3)
    net = Mlp()
    x = torch.randn(32, 8)
    y = torch.randn(32, 4)
    cfg_path = os.path.join(out, "config.json")
    with open(cfg_path, "w") as f:
        json.dump(
            {
                "task": "statistics",
                "dump_path": os.path.join(out, "dump"),
                "rank": [],
                "step": [],
                "level": "L0",
                "async_dump": False,
                "statistics": {
                    "scope": [],
                    "list": [],
                    "data_mode": ["all"],
                    "summary_mode": "statistics",
                },
            },
            f,
        )
    dbg = PrecisionDebugger(config_path=cfg_path)
    opt = torch.optim.SGD(net.parameters(), lr=LR)
    norms = {}
    for step in range(STEPS):
        dbg.start(model=net)
        opt.zero_grad()
        loss = ((net(x) - y) ** 2).mean()
        loss.backward()
        dbg.stop()
        for name, p in net.named_parameters():
            # As msprobe computes `Norm` (torch's float32 norm: its sum of squares overflows
            # once the norm passes about 1.8e19), and in float64.
            for key, n in [("grad_norm", p.grad.norm()), ("grad_norm_f64", p.grad.double().norm())]:
                n = float(n)
                # JSON has no NaN or Infinity: non-finite norms as the strings "nan", "inf".
                finite = n == n and abs(n) != float("inf")
                norms.setdefault(key, {}).setdefault(name, []).append(n if finite else repr(n))
        opt.step()
        dbg.step()
    os.remove(cfg_path)
    with open(os.path.join(out, "expected.json"), "w") as f:
        json.dump({"steps": STEPS, "lr": LR, **norms}, f, indent=1, sort_keys=True)


if __name__ == "__main__":
    main()
