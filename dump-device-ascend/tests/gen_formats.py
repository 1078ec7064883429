#!/usr/bin/env python3
"""Device-format fixtures made by numpy alone, for the converters numpy checks.

For NC1HWC0_C04, NDC1HWC0 and FRACTAL_Z_3D: a random float16 host tensor (channel counts that
leave a padded last block), its device bytes made by numpy (pad, reshape, transpose), and a
self-check that msaccucmp's backward transposes (spec cann-dump.md section 6: NC1HWC0
(0,1,4,2,3), NDC1HWC0 (0,2,5,1,3,4); FRACTAL_Z_3D the FRACTAL_Z one with D outermost) give the
host tensor back. For C1HWNCoC0 (float16 and float32, N > 1, and N = 1 as a depthwise weight):
pad C, reshape, transpose to (C1, H, W, N, C0), then place each channel on the diagonal of a
C0 x C0 block by fancy indexing (the layout of MindSpore's trans.cc NchwToC1hwncoc0); the
self-check reads the diagonal back with np.einsum.

It also writes fuzz/seeds/cann_dump/DepthwiseConv2dNative.*: a small CANN dump file (the
DumpData message hand-encoded, field numbers of spec cann-dump.md section 2) with C1HWNCoC0
tensors (int8 N = 2 with junk off the diagonal, float16 N = 1, and one whose Co is not C0),
so the cann_dump fuzz target starts from this format. `tests/formats_numpy.rs` converts the device bytes with dump-device-ascend
and compares with the host tensor. Run: python3 gen_formats.py (writes fixtures/formats/).
"""
import json
import os

import numpy as np

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "formats")
RNG = np.random.default_rng(20261125)


def ceil_div(a, b):
    return -(-a // b)


def nc1hwc0(host, c0):
    n, c, h, w = host.shape
    c1 = ceil_div(c, c0)
    pad = np.zeros((n, c1 * c0, h, w), host.dtype)
    pad[:, :c] = host
    dev = pad.reshape(n, c1, c0, h, w).transpose(0, 1, 3, 4, 2)
    back = dev.transpose(0, 1, 4, 2, 3).reshape(n, c1 * c0, h, w)[:, :c]
    assert np.array_equal(back, host)
    return dev


def ndc1hwc0(host, c0):
    n, c, d, h, w = host.shape
    c1 = ceil_div(c, c0)
    pad = np.zeros((n, c1 * c0, d, h, w), host.dtype)
    pad[:, :c] = host
    # (N, C1, C0, D, H, W) -> (N, D, C1, H, W, C0)
    dev = pad.reshape(n, c1, c0, d, h, w).transpose(0, 3, 1, 4, 5, 2)
    back = dev.transpose(0, 2, 5, 1, 3, 4).reshape(n, c1 * c0, d, h, w)[:, :c]
    assert np.array_equal(back, host)
    return dev


def fractal_z_3d(host, c0, n0):
    n, c, d, h, w = host.shape
    c1, n1 = ceil_div(c, c0), ceil_div(n, n0)
    pad = np.zeros((n1 * n0, c1 * c0, d, h, w), host.dtype)
    pad[:n, :c] = host
    # (N1, N0, C1, C0, D, H, W) -> (D, C1, H, W, N1, N0, C0)
    dev = pad.reshape(n1, n0, c1, c0, d, h, w).transpose(4, 2, 5, 6, 0, 1, 3)
    back = dev.transpose(4, 5, 1, 6, 0, 2, 3).reshape(n1 * n0, c1 * c0, d, h, w)[:n, :c]
    assert np.array_equal(back, host)
    return dev.reshape(d * c1 * h * w, n1, n0, c0)


def c1hwncoc0(host, c0):
    n, c, h, w = host.shape
    c1 = ceil_div(c, c0)
    pad = np.zeros((n, c1 * c0, h, w), host.dtype)
    pad[:, :c] = host
    # (N, C1, C0, H, W) -> (C1, H, W, N, C0), then C0 -> the diagonal of (Co, C0), Co = C0.
    blocked = pad.reshape(n, c1, c0, h, w).transpose(1, 3, 4, 0, 2)
    dev = np.zeros((c1, h, w, n, c0, c0), host.dtype)
    k = np.arange(c0)
    dev[..., k, k] = blocked
    assert np.count_nonzero(dev) == np.count_nonzero(host)
    back = np.einsum("...kk->...k", dev).transpose(3, 0, 4, 1, 2).reshape(n, c1 * c0, h, w)
    assert np.array_equal(back[:, :c], host)
    return dev


def varint(v):
    out = bytearray()
    while True:
        b, v = v & 0x7F, v >> 7
        out.append(b | 0x80 if v else b)
        if not v:
            return bytes(out)


def ld(num, payload):
    return varint(num << 3 | 2) + varint(len(payload)) + payload


def vf(num, v):
    return varint(num << 3) + varint(v)


def cann_seed():
    """A v2 CANN file: two inputs and one output in C1HWNCoC0 (format 25)."""
    def shape(dims):
        return b"".join(varint(d) for d in dims)

    def op_tensor(is_input, data_type, dev, host, payload):
        # OpInput: 1 data_type, 2 format, 3 shape, 5 size, 6 original_shape;
        # OpOutput: 1 data_type, 2 format, 3 shape, 6 size, 7 original_shape.
        size, orig = (5, 6) if is_input else (6, 7)
        return (vf(1, data_type) + vf(2, 25) + ld(3, ld(1, shape(dev))) + vf(size, len(payload))
                + ld(orig, ld(1, shape(host))))

    rng = np.random.default_rng(25)
    x = rng.integers(-100, 100, size=(2, 3, 1, 2), dtype=np.int8)
    dx = c1hwncoc0(x, 4)
    k = np.arange(4)
    off = np.ones((4, 4), bool)
    off[k, k] = False
    dx[..., off] = 0x7F  # padding: must never be read
    y = (rng.standard_normal((1, 5, 1, 1)) * 10).astype(np.float16)
    dy = c1hwncoc0(y, 4)
    bad = np.zeros((1, 1, 2, 2, 2, 4), np.int8)  # Co = 2, C0 = 4: refused, read as stored
    tensors = [(True, 3, dx, x), (True, 3, bad, x), (False, 2, dy, y)]  # INT8 = 3, FLOAT16 = 2
    msg = ld(1, b"2.0") + vf(2, 1700000000000200)
    for is_input, dt, dev, host in tensors:
        msg += ld(4 if is_input else 3,
                  op_tensor(is_input, dt, dev.shape, host.shape, dev.tobytes()))
    msg += ld(6, b"Default/dw-DepthwiseConv2dNative-op2")
    body = len(msg).to_bytes(8, "little") + msg + b"".join(t[2].tobytes() for t in tensors)
    seeds = os.path.join(os.path.dirname(OUT), "..", "..", "..", "fuzz", "seeds", "cann_dump")
    name = "DepthwiseConv2dNative.Default_dw-DepthwiseConv2dNative-op2.2.0.1700000000000200"
    with open(os.path.join(seeds, name), "wb") as f:
        f.write(body)


def main():
    os.makedirs(OUT, exist_ok=True)
    cases = []

    def save(name, fmt, host, dev):
        host_file, dev_file = name + ".host.npy", name + ".device.bin"
        np.save(os.path.join(OUT, host_file), host)
        with open(os.path.join(OUT, dev_file), "wb") as f:
            f.write(np.ascontiguousarray(dev).tobytes())
        cases.append({"name": name, "format": fmt, "dtype": host.dtype.name,
                      "host_shape": list(host.shape), "device_shape": list(dev.shape),
                      "host": host_file, "device": dev_file})

    h = (RNG.standard_normal((2, 7, 3, 5)) * 10).astype(np.float16)
    save("c04", "NC1HWC0_C04", h, nc1hwc0(h, 4))
    h = (RNG.standard_normal((2, 19, 3, 2, 5)) * 10).astype(np.float16)
    save("ndc1hwc0", "NDC1HWC0", h, ndc1hwc0(h, 16))
    h = (RNG.standard_normal((17, 5, 2, 3, 3)) * 10).astype(np.float16)
    save("fractal_z_3d", "FRACTAL_Z_3D", h, fractal_z_3d(h, 16, 16))
    h = (RNG.standard_normal((3, 21, 2, 3)) * 10).astype(np.float16)
    save("c1hwncoc0_f16", "C1HWNCoC0", h, c1hwncoc0(h, 16))
    h = (RNG.standard_normal((2, 19, 2, 2)) * 10).astype(np.float32)
    save("c1hwncoc0_f32", "C1HWNCoC0", h, c1hwncoc0(h, 16))
    h = (RNG.standard_normal((1, 35, 3, 3)) * 10).astype(np.float16)
    save("c1hwncoc0_n1", "C1HWNCoC0", h, c1hwncoc0(h, 16))
    with open(os.path.join(OUT, "manifest.json"), "w") as f:
        json.dump({"numpy": np.__version__, "cases": cases}, f, indent=1)
    cann_seed()


if __name__ == "__main__":
    main()
