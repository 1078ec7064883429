"""The numpy baseline of `cargo xtask bench-stats --only convert`: what msaccucmp's pure-Python
`convert -f NCHW` does, in one process. Each CANN dump file (v2: u64 length, DumpData message,
payloads) is read whole into memory, the message is parsed (a minimal protobuf reader: outputs
and inputs with data_type, format, shape, size, original_shape), each FLOAT16 NC1HWC0 /
FRACTAL_Z payload is converted to NCHW with numpy's reshape/transpose/slice (spec §6 kernels)
and saved as `{file}.{input|output}.{i}.{d0}x{d1}x....npy`.

usage: python3 cann_convert_numpy.py OUT_DIR FILE...   (prints the seconds taken)
"""
import os
import sys
import time

import numpy as np


def varint(b, i):
    v = s = 0
    while True:
        x = b[i]
        i += 1
        v |= (x & 0x7F) << s
        s += 7
        if x < 0x80:
            return v, i


def fields(b):
    i = 0
    while i < len(b):
        key, i = varint(b, i)
        num, wt = key >> 3, key & 7
        if wt == 0:
            v, i = varint(b, i)
        elif wt == 2:
            n, i = varint(b, i)
            v = b[i:i + n]
            i += n
        elif wt == 1:
            v = b[i:i + 8]
            i += 8
        elif wt == 5:
            v = b[i:i + 4]
            i += 4
        else:
            raise ValueError("wire type %d" % wt)
        yield num, v


def dims(b):
    out = []
    for num, v in fields(b):
        if num == 1:
            if isinstance(v, int):
                out.append(v)
            else:
                j = 0
                while j < len(v):
                    d, j = varint(v, j)
                    out.append(d)
    return out


def tensor(b, is_output):
    t = {"dtype": 0, "format": 0, "shape": [], "size": 0, "orig": []}
    size_f, orig_f = (6, 7) if is_output else (5, 6)
    for num, v in fields(b):
        if num == 1:
            t["dtype"] = v
        elif num == 2:
            t["format"] = v
        elif num == 3:
            t["shape"] = dims(v)
        elif num == size_f:
            t["size"] = v
        elif num == orig_f:
            t["orig"] = dims(v)
    return t


def to_nchw(a, fmt, shape, orig):
    n, c, h, w = orig
    if fmt == 3:  # NC1HWC0
        x = a.reshape(shape).transpose(0, 1, 4, 2, 3)
        return x.reshape(shape[0], shape[1] * shape[4], shape[2], shape[3])[:, :c]
    if fmt == 4:  # FRACTAL_Z (C1*H*W, No, Ni, C0)
        c1 = shape[0] // (h * w)
        x = a.reshape(c1, h, w, shape[1], shape[2], shape[3]).transpose(3, 4, 0, 5, 1, 2)
        return x.reshape(shape[1] * shape[2], c1 * shape[3], h, w)[:n, :c]
    return a.reshape(orig)


def convert(path, out):
    with open(path, "rb") as f:
        data = f.read()
    n = int.from_bytes(data[:8], "little")
    msg = data[8:8 + n]
    ins, outs = [], []
    for num, v in fields(msg):
        if num == 4:
            ins.append(tensor(v, False))
        elif num == 3:
            outs.append(tensor(v, True))
    off = 8 + n
    base = os.path.basename(path)
    for kind, ts in (("input", ins), ("output", outs)):
        for i, t in enumerate(ts):
            a = np.frombuffer(data, dtype=np.float16, count=t["size"] // 2, offset=off)
            off += t["size"]
            x = np.ascontiguousarray(to_nchw(a, t["format"], t["shape"], t["orig"]))
            np.save(os.path.join(out, "%s.%s.%d.%s.npy" % (base, kind, i, "x".join(map(str, x.shape)))), x)


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    t = time.perf_counter()
    for p in sys.argv[2:]:
        convert(p, out)
    print(time.perf_counter() - t)


if __name__ == "__main__":
    main()
