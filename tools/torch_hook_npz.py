"""Dump a PyTorch model's activations into an .npz that `opdump compare` reads as a reference.

Every leaf module's first output is saved under a key: the module's name, or the ONNX value
name you give it in NAMES (the name the Rust run's graphs/*.ir shows for that node's output,
e.g. "/layer1/layer1.0/conv1/Conv_output_0" with the TorchScript exporter). Then:
    opdump compare RUST_DUMP_DIR activations.npz
Usage (as a module): save_activations(model, example_input, "activations.npz", NAMES)
"""
import numpy as np
import torch


def save_activations(model, x, path, names=None):
    names, out, hooks = names or {}, {}, []
    for name, m in model.named_modules():
        if name and not list(m.children()):  # leaf modules only, run order kept by dict order
            def hook(_m, _inp, y, name=name):
                y = y[0] if isinstance(y, (tuple, list)) else y
                # copied: an in-place op later (ReLU(inplace=True)) would change a shared buffer
                out.setdefault(names.get(name, name), y.detach().float().cpu().numpy().copy())
            hooks.append(m.register_forward_hook(hook))
    with torch.no_grad():
        model.eval()(x)
    for h in hooks:
        h.remove()
    np.savez(path, **out)  # stored, not compressed: opdump streams the members in place
    return list(out)
