#!/usr/bin/env python3
"""Generates the CANN dump fixtures of dump-device-ascend's `dumpfile` tests.

    python3 -m pip install numpy protobuf ml_dtypes
    python3 dump-device-ascend/tests/gen_cann.py      # writes tests/fixtures/cann/

The `DumpData` message is built with the `protobuf` package from a descriptor made here from
the field table of shared/spec/cann-dump.md §2 (no protoc needed); the same table is written
out as `dump_data.proto` for reference. Files the protobuf package will not produce (unpacked
dims, unknown fields, broken encodings) are assembled by hand from the wire format.

Outputs, under tests/fixtures/cann/:
  *.bin-free CANN file names ({op_type}.{op_name}.{task}.{stream}.{ts}) -- the dump files;
  npy/*.npy      -- each tensor's expected array where numpy can hold it (see EXPECT below);
  opdebug/*.json -- the expected overflow JSON (4-space indent, insertion order);
  manifest.json  -- per file: container, message fields, every tensor's metadata, or the
                    error a hostile file must give.
Deterministic: a fixed seed, so re-running gives the same bytes.
"""

import json
import os
import shutil
import struct
import sys

import numpy as np
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

try:
    import ml_dtypes
except ImportError:  # bf16 falls back to truncation; float8 needs it
    ml_dtypes = None

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "cann")
RNG = np.random.default_rng(20261124)

# ---------------------------------------------------------------------------------------------
# The message, from the spec's table (field numbers and types).
U64, U32, I32, STR, BYTES = "uint64", "uint32", "int32", "string", "bytes"
MESSAGES = {
    "Shape": [(1, "dim", U64, "repeated")],
    "DimRange": [(1, "dim_start", U64, ""), (2, "dim_end", U64, "")],
    "OriginalOp": [(1, "name", STR, ""), (2, "output_index", U32, ""),
                   (3, "data_type", I32, ""), (4, "format", I32, "")],
    "OpOutput": [(1, "data_type", I32, ""), (2, "format", I32, ""), (3, "shape", "Shape", ""),
                 (4, "original_op", "OriginalOp", ""), (5, "data", BYTES, ""),
                 (6, "size", U64, ""), (7, "original_shape", "Shape", ""),
                 (8, "sub_format", I32, ""), (9, "address", U64, ""),
                 (10, "dim_range", "DimRange", "repeated"), (11, "offset", U64, ""),
                 (12, "arg_index", U32, "")],
    "OpInput": [(1, "data_type", I32, ""), (2, "format", I32, ""), (3, "shape", "Shape", ""),
                (4, "data", BYTES, ""), (5, "size", U64, ""),
                (6, "original_shape", "Shape", ""), (7, "sub_format", I32, ""),
                (8, "address", U64, ""), (9, "offset", U64, ""), (10, "arg_index", U32, ""),
                (11, "input_type", U32, "")],
    "OpBuffer": [(1, "buffer_type", I32, ""), (2, "data", BYTES, ""), (3, "size", U64, "")],
    "OpAttr": [(1, "name", STR, ""), (2, "value", STR, "")],
    "Workspace": [(1, "type", I32, ""), (2, "data", BYTES, ""), (3, "size", U64, ""),
                  (4, "arg_index", U32, "")],
    "DumpData": [(1, "version", STR, ""), (2, "dump_time", U64, ""),
                 (3, "output", "OpOutput", "repeated"), (4, "input", "OpInput", "repeated"),
                 (5, "buffer", "OpBuffer", "repeated"), (6, "op_name", STR, ""),
                 (7, "attr", "OpAttr", "repeated"), (8, "space", "Workspace", "repeated"),
                 (9, "dfx_message", STR, "")],
}
# Enum-typed fields are declared int32 here: the same wire encoding (varint, sign-extended).
PKG = "toolkit.dump"
FD = descriptor_pb2.FieldDescriptorProto
SCALARS = {U64: FD.TYPE_UINT64, U32: FD.TYPE_UINT32, I32: FD.TYPE_INT32, STR: FD.TYPE_STRING,
           BYTES: FD.TYPE_BYTES}


def build_classes():
    f = descriptor_pb2.FileDescriptorProto(name="dump_data.proto", package=PKG, syntax="proto3")
    for name, fields in MESSAGES.items():
        m = f.message_type.add(name=name)
        for num, fname, ftype, label in fields:
            fd = m.field.add(name=fname, number=num)
            fd.label = FD.LABEL_REPEATED if label else FD.LABEL_OPTIONAL
            if ftype in SCALARS:
                fd.type = SCALARS[ftype]
            else:
                fd.type = FD.TYPE_MESSAGE
                fd.type_name = f".{PKG}.{ftype}"
    pool = descriptor_pool.DescriptorPool()
    pool.Add(f)
    return {n: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{PKG}.{n}"))
            for n in MESSAGES}


def write_proto(path):
    lines = ['// Written by gen_cann.py from shared/spec/cann-dump.md §2 (enums as int32).',
             'syntax = "proto3";', f"package {PKG};", ""]
    for name, fields in MESSAGES.items():
        lines.append(f"message {name} {{")
        for num, fname, ftype, label in fields:
            lines.append(f"  {'repeated ' if label else ''}{ftype} {fname} = {num};")
        lines += ["}", ""]
    with open(path, "w") as fh:
        fh.write("\n".join(lines))


PB = build_classes()

# ---------------------------------------------------------------------------------------------
# Data types (spec §2.1): name -> (value, how the test checks the bytes)
#   "raw":   the .npy holds the payload's own array (same bytes)
#   "bf16":  the .npy holds float32 values; the test widens bf16 -> f32
#   "int4":  the .npy holds int8 values; the test widens int4 -> int8 (low nibble first)
#   "uint1": the .npy holds uint8 bits (np.unpackbits, MSB first); the test widens uint1
#   "fp8":   the payload is random bytes; the .npy holds ml_dtypes' float32 of them (NaN as
#            ml_dtypes gives it); the test widens float8 -> float32
#   None:    no workspace dtype: the .npy holds the raw bytes as uint8, dtype() must fail
DTYPES = [
    ("UNDEFINED", 0, None, None), ("FLOAT", 1, "raw", np.float32), ("FLOAT16", 2, "raw", np.float16),
    ("INT8", 3, "raw", np.int8), ("UINT8", 4, "raw", np.uint8), ("INT16", 5, "raw", np.int16),
    ("UINT16", 6, "raw", np.uint16), ("INT32", 7, "raw", np.int32), ("INT64", 8, "raw", np.int64),
    ("UINT32", 9, "raw", np.uint32), ("UINT64", 10, "raw", np.uint64), ("BOOL", 11, "raw", np.bool_),
    ("DOUBLE", 12, "raw", np.float64), ("STRING", 13, None, None), ("DUAL_SUB_INT8", 14, None, None),
    ("DUAL_SUB_UINT8", 15, None, None), ("COMPLEX64", 16, "raw", np.complex64),
    ("COMPLEX128", 17, "raw", np.complex128), ("QINT8", 18, None, None), ("QINT16", 19, None, None),
    ("QINT32", 20, None, None), ("QUINT8", 21, None, None), ("QUINT16", 22, None, None),
    ("RESOURCE", 23, None, None), ("STRING_REF", 24, None, None), ("DUAL", 25, None, None),
    ("VARIANT", 26, None, None), ("BF16", 27, "bf16", None), ("INT4", 28, "int4", None),
    ("UINT1", 29, "uint1", None), ("INT2", 30, None, None), ("UINT2", 31, None, None),
    ("COMPLEX32", 32, None, None), ("HIFLOAT8", 33, None, None), ("FLOAT8_E5M2", 34, "fp8", "float8_e5m2"),
    ("FLOAT8_E4M3FN", 35, "fp8", "float8_e4m3fn"), ("FLOAT8_E8M0", 36, None, None),
    ("FLOAT6_E3M2", 37, None, None), ("FLOAT6_E2M3", 38, None, None),
    ("FLOAT4_E2M1", 39, None, None), ("FLOAT4_E1M2", 40, None, None),
    ("HIFLOAT4", 41, None, None), ("HIFLOAT4_SCALE", 42, None, None),
]
FORMATS = {"NCHW": 0, "NHWC": 1, "ND": 2, "NC1HWC0": 3, "FRACTAL_Z": 4, "HWCN": 16,
           "C1HWNCoC0": 25, "FRACTAL_NZ": 29, "NCDHW": 30, "NDC1HWC0": 32, "MAX": 255}

MANIFEST = {"files": []}


def npy_save(name, arr):
    os.makedirs(os.path.join(OUT, "npy"), exist_ok=True)
    np.save(os.path.join(OUT, "npy", name), arr)
    return name


def tensor_payload(dname, check, npt, shape, stem):
    """Returns (payload bytes, expectation dict) for a tensor of dtype `dname` and `shape`."""
    n = int(np.prod(shape))
    if check == "raw":
        if npt == np.bool_:
            arr = RNG.integers(0, 2, size=shape).astype(np.bool_)
        elif np.issubdtype(npt, np.complexfloating):
            arr = (RNG.standard_normal(shape) + 1j * RNG.standard_normal(shape)).astype(npt)
        elif np.issubdtype(npt, np.floating):
            arr = (RNG.standard_normal(shape) * 100).astype(npt)
            if n > 2:
                arr.flat[0] = np.nan
            if n > 3:
                arr.flat[1] = -np.inf
        else:
            info = np.iinfo(npt)
            arr = RNG.integers(info.min, info.max, size=shape, dtype=npt, endpoint=True)
        return arr.tobytes(), {"check": "raw", "npy": npy_save(stem + ".npy", arr)}
    if check == "bf16":
        vals = (RNG.standard_normal(shape) * 10).astype(np.float32)
        if ml_dtypes is not None:
            b = vals.astype(ml_dtypes.bfloat16)
            payload, widened = b.tobytes(), b.astype(np.float32)
        else:  # truncation, the same values ml_dtypes would give for these inputs' halves
            bits = (vals.view(np.uint32) >> 16).astype(np.uint16)
            payload, widened = bits.tobytes(), (bits.astype(np.uint32) << 16).view(np.float32)
        return payload, {"check": "bf16", "npy": npy_save(stem + ".npy", widened.reshape(shape))}
    if check == "int4":
        vals = RNG.integers(-8, 7, size=n, endpoint=True).astype(np.int8)
        padded = np.concatenate([vals, np.zeros(n % 2, np.int8)])
        lo, hi = padded[0::2] & 0xF, padded[1::2] & 0xF
        payload = (lo | (hi << 4)).astype(np.uint8).tobytes()
        return payload, {"check": "int4", "npy": npy_save(stem + ".npy", vals.reshape(shape))}
    if check == "uint1":
        bits = RNG.integers(0, 1, size=n, endpoint=True).astype(np.uint8)
        payload = np.packbits(bits).tobytes()  # MSB first, last byte zero-padded
        return payload, {"check": "uint1", "npy": npy_save(stem + ".npy", bits.reshape(shape))}
    raw = RNG.integers(0, 255, size=(n,), dtype=np.uint8, endpoint=True)
    if check == "fp8":
        if ml_dtypes is None:
            raise SystemExit("float8 fixtures need ml_dtypes (pip install ml_dtypes)")
        widened = raw.view(getattr(ml_dtypes, npt)).astype(np.float32)
        return raw.tobytes(), {"check": "fp8", "name": dname,
                               "npy": npy_save(stem + ".npy", widened.reshape(shape))}
    return raw.tobytes(), {"check": "unsupported", "name": dname,
                           "npy": npy_save(stem + ".npy", raw)}


def set_shape(msg, dims):
    msg.dim.extend(dims)


def add_tensor(dd, kind, t):
    """Adds tensor `t` (a dict) to DumpData `dd`; `kind` input/output/buffer/workspace."""
    if kind in ("input", "output"):
        m = (dd.input if kind == "input" else dd.output).add()
        m.data_type = t["data_type"]
        m.format = t["format"]
        set_shape(m.shape, t["shape"])
        if t.get("original_shape") is not None:
            set_shape(m.original_shape, t["original_shape"])
            if not t["original_shape"]:
                m.original_shape.SetInParent()
        m.sub_format = t.get("sub_format", 0)
        m.address = t.get("address", 0)
        m.offset = t.get("address_offset", 0)
        if t.get("arg_index") is not None:
            m.arg_index = t["arg_index"]
        if kind == "input":
            m.input_type = t.get("input_type", 0)
        if kind == "output" and t.get("original_op"):
            o = t["original_op"]
            m.original_op.name, m.original_op.output_index = o["name"], o["output_index"]
            m.original_op.data_type, m.original_op.format = o["data_type"], o["format"]
        if kind == "output":
            for a, b in t.get("dim_range", []):
                r = m.dim_range.add()
                r.dim_start, r.dim_end = a, b
    elif kind == "buffer":
        m = dd.buffer.add()
        m.buffer_type = t.get("buffer_type", 0)
    else:
        m = dd.space.add()
        m.type = t.get("buffer_type", 0)
        if t.get("arg_index") is not None:
            m.arg_index = t["arg_index"]
    return m


KIND_ORDER = ["input", "output", "buffer", "workspace"]


def write_dump(name, version, tensors, op_name, inline=False, trailing=b"", attrs=(), dfx="",
               dump_time=1700000000123456, extra_message=b""):
    """Writes a dump file; `tensors` is a list of dicts with kind, payload, metadata."""
    dd = PB["DumpData"]()
    dd.version = version
    dd.dump_time = dump_time
    dd.op_name = op_name
    dd.dfx_message = dfx
    for k, v in attrs:
        a = dd.attr.add()
        a.name, a.value = k, v
    counters = {k: 0 for k in KIND_ORDER}
    for t in tensors:
        t["index"] = counters[t["kind"]]
        counters[t["kind"]] += 1
        m = add_tensor(dd, t["kind"], t)
        if inline:
            m.data = t["payload"]
        else:
            m.size = len(t["payload"])
    msg = dd.SerializeToString() + extra_message
    ordered = sorted(tensors, key=lambda t: (KIND_ORDER.index(t["kind"]), t["index"]))
    if inline:
        body = msg
        # where each data field's bytes are: found by searching the serialized message is
        # ambiguous, so re-parse with the protobuf package and locate by unique payloads.
        for t in ordered:
            t["offset"] = body.find(t["payload"]) if t["payload"] else 0
            assert not t["payload"] or body.count(t["payload"]) == 1, name
        container = {"variant": "inline"}
    else:
        body = struct.pack("<Q", len(msg)) + msg
        at = len(body)
        for t in ordered:
            t["offset"] = at
            at += len(t["payload"])
        body += b"".join(t["payload"] for t in ordered) + trailing
        container = {"variant": "binary", "message_len": len(msg)}
    with open(os.path.join(OUT, name), "wb") as fh:
        fh.write(body)
    entry = {"file": name, "container": container, "version": version, "dump_time": dump_time,
             "op_name": op_name, "dfx_message": dfx, "attrs": [list(a) for a in attrs],
             "file_len": len(body), "tensors": []}
    for i, t in enumerate(ordered):
        e = {k: t.get(k) for k in ("kind", "index", "data_type", "format", "shape",
                                   "original_shape", "sub_format", "address", "address_offset",
                                   "arg_index", "input_type", "buffer_type", "original_op",
                                   "dim_range", "expect")}
        e.update(ordinal=i, size=len(t["payload"]), offset=t["offset"])
        for k, d in (("sub_format", 0), ("address", 0), ("address_offset", 0),
                     ("input_type", 0), ("buffer_type", 0), ("dim_range", [])):
            e[k] = e[k] if e[k] is not None else d
        if e["kind"] in ("buffer", "workspace"):
            e.update(data_type=0, format=0, shape=[], original_shape=None)
        entry["tensors"].append(e)
    MANIFEST["files"].append(entry)
    return body


def tensor(kind, dname, fmt, shape, stem, original_shape=None, **kw):
    value, check, npt = next((v, c, t) for n, v, c, t in DTYPES if n == dname)
    payload, expect = tensor_payload(dname, check, npt, shape, stem)
    t = dict(kind=kind, data_type=value, format=FORMATS[fmt] if isinstance(fmt, str) else fmt,
             shape=list(shape), original_shape=original_shape, payload=payload, expect=expect)
    t.update(kw)
    return t


def raw_tensor(kind, payload, **kw):
    t = dict(kind=kind, data_type=0, format=0, shape=[], payload=payload,
             expect={"check": "bytes", "hex": payload.hex()})
    t.update(kw)
    return t


# ---------------------------------------------------------------------------------------------
# Hand-made wire encoding, for what the protobuf package will not write.
def varint(v):
    v &= (1 << 64) - 1
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def key(num, wt):
    return varint(num << 3 | wt)


def ld(num, payload):
    return key(num, 2) + varint(len(payload)) + payload


def vf(num, v):
    return key(num, 0) + varint(v)


def hostile(name, data, error, contains, **kw):
    with open(os.path.join(OUT, "hostile", name), "wb") as fh:
        fh.write(data)
    e = {"file": "hostile/" + name, "error": error, "contains": contains}
    e.update(kw)
    MANIFEST.setdefault("hostile", []).append(e)


def v2(msg, payload=b""):
    return struct.pack("<Q", len(msg)) + msg + payload


# ---------------------------------------------------------------------------------------------
def main():
    if os.path.isdir(OUT):
        shutil.rmtree(OUT)
    os.makedirs(os.path.join(OUT, "hostile"))
    os.makedirs(os.path.join(OUT, "opdebug"))
    write_proto(os.path.join(OUT, "dump_data.proto"))
    ts = 1700000000000000

    # 1. Every data type: a v2 file with one input and one output of that type.
    for i, (dname, value, check, _) in enumerate(DTYPES):
        ts += 1
        stem = f"Cast.Default_network_cast{value}.{value}.2.{ts}"
        shape_in, shape_out = ([2, 3], [3, 5]) if value != 29 else ([2, 5], [3, 3])
        write_dump(stem, "2.0", [
            tensor("input", dname, "ND", shape_in, stem + ".input.0", original_shape=shape_in),
            tensor("output", dname, "ND", shape_out, stem + ".output.0",
                   original_shape=shape_out, arg_index=1),
        ], op_name=f"Default/network/Cast-op{value}")

    # 2. Several formats, device and host shapes, sub_format, original_op, dim_range, attrs,
    #    buffers and workspaces.
    ts += 1
    stem = f"Conv2D.Default_network_conv1-Conv2d_Conv2D-op12.12.3.{ts}"
    write_dump(stem, "2.0", [
        tensor("input", "FLOAT16", "NC1HWC0", [1, 1, 2, 2, 16], stem + ".input.0",
               original_shape=[1, 3, 2, 2], address=0x12C0_0000_0000, input_type=1),
        tensor("input", "FLOAT16", "FRACTAL_Z", [4, 1, 16, 16], stem + ".input.1",
               original_shape=[8, 3, 2, 2], sub_format=1, arg_index=1),
        tensor("input", "FLOAT", "NCHW", [2, 3, 2, 2], stem + ".input.2", original_shape=[]),
        tensor("output", "FLOAT16", "NC1HWC0", [1, 1, 2, 2, 16], stem + ".output.0",
               original_shape=[1, 8, 2, 2], address_offset=64,
               original_op={"name": "conv1", "output_index": 0, "data_type": 2, "format": 0},
               dim_range=[(1, 4), (0, 7)]),
        tensor("output", "BF16", "FRACTAL_NZ", [2, 3, 16, 16], stem + ".output.1",
               original_shape=[2, 40, 30]),
        tensor("output", "INT8", "NCDHW", [1, 2, 2, 2, 3], stem + ".output.2",
               original_shape=[1, 2, 2, 2, 3]),
        tensor("output", "FLOAT", "NDC1HWC0", [1, 2, 1, 2, 2, 16], stem + ".output.3"),
        tensor("output", "INT32", 50, [4], stem + ".output.4"),  # a format the spec lacks
        tensor("output", "UINT8", "MAX", [3], stem + ".output.5"),
        tensor("output", "FLOAT", "C1HWNCoC0", [1, 1, 1, 1, 16, 16], stem + ".output.6"),
        raw_tensor("buffer", bytes(range(40)), buffer_type=0),
        raw_tensor("workspace", bytes(range(100, 117)), buffer_type=0, arg_index=7),
        raw_tensor("workspace", b"", buffer_type=0),
    ], op_name="Default/network/conv1-Conv2d/Conv2D-op12",
        attrs=[("ffts", '{"threadMode":1,"slice_instance_num":2}'), ("x", "")],
        dfx="dfx: note", trailing=b"")

    # 3. Empty tensors, trailing bytes after the payloads, negative enum value.
    ts += 1
    stem = f"Add.Add-op3.3.0.{ts}"
    write_dump(stem, "2.0", [
        tensor("input", "FLOAT", "ND", [0, 4], stem + ".input.0", original_shape=[0, 4]),
        tensor("input", "INT64", "ND", [], stem + ".input.1"),  # a scalar: shape [] size 8
        tensor("output", "FLOAT", -1, [2], stem + ".output.0"),
    ], op_name="Add-op3", trailing=b"\xAB" * 5)

    # 4. The old inline (v1) variant: tensor bytes in the `data` fields (outputs come first
    #    in the message, field 3 before field 4).
    for ver, extra in (("1.0", ""), ("", "_noversion")):
        ts += 1
        stem = f"MatMul.Default_MatMul-op7{extra}.7.1.{ts}"
        write_dump(stem, ver, [
            tensor("input", "FLOAT", "ND", [4, 3], stem + ".input.0", original_shape=[4, 3]),
            tensor("input", "FLOAT16", "ND", [3, 2], stem + ".input.1", original_shape=[3, 2]),
            tensor("output", "INT16", "ND", [4, 2], stem + ".output.0"),
            tensor("output", "FLOAT8_E4M3FN", "ND", [5], stem + ".output.1"),
        ], op_name="Default/MatMul-op7", inline=True)

    # 5. Hand-encoded v2: dims unpacked, unknown fields in every message, fixed32/fixed64
    #    unknown fields, an OpOutput field 12 (arg_index) and 13 (unknown).
    ts += 1
    stem = f"Relu.Relu-op9.9.0.{ts}"
    arr = RNG.standard_normal((2, 3)).astype(np.float32)
    shape_unpacked = vf(1, 2) + vf(1, 3) + vf(99, 5)
    out = (vf(1, 1) + vf(2, 2) + ld(3, shape_unpacked) + vf(6, arr.nbytes) + vf(12, 4)
           + vf(13, 77) + key(14, 5) + b"\1\2\3\4" + key(15, 1) + b"\0" * 8 + ld(16, b"xyz"))
    msg = ld(1, b"2.0") + vf(2, 5) + ld(3, out) + ld(6, b"Relu-op9") + ld(100, b"future") \
        + vf(101, 1)
    data = v2(msg, arr.tobytes())
    with open(os.path.join(OUT, stem), "wb") as fh:
        fh.write(data)
    MANIFEST["files"].append({
        "file": stem, "container": {"variant": "binary", "message_len": len(msg)},
        "version": "2.0", "dump_time": 5, "op_name": "Relu-op9", "dfx_message": "", "attrs": [],
        "file_len": len(data), "tensors": [{
            "kind": "output", "index": 0, "ordinal": 0, "data_type": 1, "format": 2,
            "shape": [2, 3], "original_shape": None, "sub_format": 0, "address": 0,
            "address_offset": 0, "arg_index": 4, "input_type": 0, "buffer_type": 0,
            "original_op": None, "dim_range": [], "size": arr.nbytes,
            "offset": 8 + len(msg),
            "expect": {"check": "raw", "npy": npy_save(stem + ".output.0.npy", arr)}}]})

    # 6. Overflow (op-debug) files: v2 containers with one UINT8 ND [2048] (or shorter)
    #    output holding the block.
    def opdebug(tag, block, sections):
        nonlocal ts
        ts += 1
        stem = f"Opdebug.Node_OpDebug.{tag}.0.{ts}"
        write_dump(stem, "2.0", [dict(kind="output", data_type=4, format=2,
                                      shape=[len(block)], payload=block,
                                      expect={"check": "opdebug", "json": f"opdebug/{stem}.json"})],
                   op_name="Node_OpDebug")
        with open(os.path.join(OUT, "opdebug", stem + ".json"), "w") as fh:
            json.dump(sections, fh, indent=4)

    def hexed(d):
        return {k: (hex(v) if k in ("pc_start", "para_base", "kernel_code", "src_addr",
                                    "dst_addr") else v) for k, v in d.items()}

    six = ["model_id", "stream_id", "task_id", "task_type", "pc_start", "para_base"]
    block = bytearray(2048)
    sections = {}
    for name, at, status_at, base in (("DHA Atomic Add", 0, 512, 10), ("L2 Atomic Add", 128, 768, 20),
                                      ("AI Core", 256, None, 30)):
        vals = {k: base + i for i, k in enumerate(six)}
        vals["pc_start"] = 0x1240_0000_0000 + base
        vals["para_base"] = 0x1241_0000_0000 + base
        struct.pack_into("<6Q", block, at, *vals.values())
        if status_at is not None:
            vals["status"] = 0x10 + base
            struct.pack_into("<Q", block, status_at, vals["status"])
        else:
            vals.update(kernel_code=0x1250_0000_0000, block_idx=3, status=0x80)
            struct.pack_into("<3Q", block, 1024, 0x1250_0000_0000, 3, 0x80)
        sections[name] = hexed(vals)
    opdebug(1, bytes(block), sections)

    def new_block(version, acc, names, valid=1, data_len=None, base=100):
        vals = {n: base + i for i, n in enumerate(names)}
        for k in ("pc_start", "para_base", "src_addr", "dst_addr"):
            if k in vals:
                vals[k] = 0x1240_0000_0000 + vals[k]
        head = ["model_id", "stream_id", "task_id", "task_type"]
        assert names[:4] == head
        dl = 8 * len(names) if data_len is None else data_len
        b = struct.pack("<IIIIII", 0x5A5A5A5A, version, valid, acc, 0, dl)
        b += struct.pack(f"<{len(names)}Q", *vals.values())
        return b + bytes(64), vals

    head = ["model_id", "stream_id", "task_id", "task_type"]
    core = head + ["context_id", "thread_id", "pc_start", "para_base", "core_id", "block_id"]
    for tag, version, acc, sec, names in (
            (2, 0, 0, "AI Core", core + ["status"]),
            (3, 1, 1, "AI Vector", core + ["status0", "status1", "status2", "status3"]),
            (4, 0, 2, "AI CPU", head + ["context_id", "cpu_id", "thread_id", "status"]),
            (5, 0, 3, "SDMA", head + ["context_id", "thread_id", "src_addr", "dst_addr",
                                      "channel_id", "status"])):
        b, vals = new_block(version, acc, names, base=100 * tag)
        opdebug(tag, b, {sec: hexed(vals)})

    # 7. Hostile files: each must give its own error.
    ok_out = vf(1, 1) + vf(2, 2) + ld(3, ld(1, varint(2))) + vf(6, 8)
    ok_in = vf(1, 1) + vf(2, 2) + ld(3, ld(1, varint(2))) + vf(5, 8)
    good_msg = ld(1, b"2.0") + ld(3, ok_out) + ld(3, ok_out)
    hostile("too_short", b"\x05\0\0\0\0", "TooShort", "file is 5 bytes")
    hostile("eight_bytes", struct.pack("<Q", 0), "TooShort", "file is 8 bytes")
    hostile("nano", struct.pack("<QI", 16, 0x5A5A5A5A) + bytes(12), "NanoContainer", "nano")
    hostile("wrong_length", struct.pack("<Q", len(good_msg) + 100) + good_msg + bytes(16),
            "MessageLength", f"declares a {len(good_msg) + 100}-byte message but only "
                             f"{len(good_msg) + 16} bytes follow")
    hostile("huge_length", struct.pack("<Q", 1 << 40) + good_msg, "MessageLength",
            f"declares a {1 << 40}-byte message")
    hostile("huge_length_le_file", struct.pack("<Q", 300 << 20) + good_msg, "MessageLength",
            f"declares a {300 << 20}-byte message")
    full = v2(good_msg, bytes(16))
    hostile("truncated_data", full[:-3], "PayloadPastEnd",
            f"tensor 1 (output 1) declares 8 bytes from byte {8 + len(good_msg) + 8} but the "
            f"file ends at byte {len(full) - 3}")
    big_out = vf(1, 1) + vf(2, 2) + vf(6, 1 << 32)
    m = ld(1, b"2.0") + ld(4, ok_in) + ld(4, ok_in) + ld(4, ok_in) + ld(3, ok_out) + ld(3, big_out)
    hostile("size_past_end", v2(m, bytes(40)), "PayloadPastEnd",
            f"tensor 4 (output 1) declares 4294967296 bytes from byte {8 + len(m) + 32} but the "
            f"file ends at byte {8 + len(m) + 40}")
    m = ld(1, b"2.0") + ld(3, vf(6, (1 << 64) - 1))
    hostile("size_overflow", v2(m, bytes(4)), "PayloadPastEnd",
            f"tensor 0 (output 0) declares 18446744073709551615 bytes")
    m = ld(1, b"2.0") + ld(3, b"\x1A\x00") * 70000
    hostile("huge_count", v2(m), "TooManyTensors", "exceeds the limit of 65536 tensors")
    m = ld(1, b"2.0") + ld(3, ld(3, ld(1, varint(1) * 100)))
    hostile("huge_rank", v2(m), "RankTooLarge", "exceeds the limit of 64 dimensions")
    m = ld(1, b"2.0") + ld(3, ok_out)
    cut = len(m) - 3
    hostile("truncated_message", struct.pack("<Q", cut) + m[:cut] + bytes(4), "Wire",
            "protobuf at byte 13, DumpData.output (field 3): needs 11 bytes but only 8 are left")
    m = ld(1, b"2.0") + key(2, 0) + b"\xFF" * 10 + b"\x01"
    hostile("varint_overflow", v2(m), "Wire", "DumpData.dump_time (field 2): varint longer")
    m = ld(1, b"2.0") + ld(3, vf(1, 1) + ld(6, b"\x08"))
    hostile("wrong_wire_type", v2(m), "Wire", "OpOutput.size (field 6): wire type 2, expected 0")
    m = ld(1, b"2.0") + key(7, 3) + key(7, 4)
    hostile("group", v2(m), "Wire", "wire type 3 (allowed")
    m = ld(1, b"2.0") + b"\x00"
    hostile("field_zero", v2(m, bytes(3)), "Wire", "field number 0")
    m = ld(1, b"1.0") + ld(3, vf(1, 1) + ld(5, b"\1\2\3\4")) + ld(6, b"x")
    hostile("inline_truncated", m[:-4], "Wire", "DumpData.output (field 3): needs")
    m = ld(1, b"2.0") + ld(3, vf(1, 1) + ld(5, b"\1\2\3\4"))
    hostile("inline_version_2", m, "MessageLength", "declares a")
    hostile("opdebug_short_block",
            v2(ld(1, b"2.0") + ld(6, b"Node_OpDebug") + ld(3, vf(1, 4) + vf(2, 2) + vf(6, 100)),
               bytes(100)), "OpDebug", "must be exactly 2048 bytes (found 100)", opdebug=True)
    b, _ = new_block(0, 9, core + ["status"])
    hostile("opdebug_acc_type",
            v2(ld(1, b"2.0") + ld(3, vf(1, 4) + vf(6, len(b))), b), "OpDebug",
            "overflow block at byte 12: acc_type", opdebug=True)
    b, _ = new_block(0, 0, core + ["status"], data_len=16)
    hostile("opdebug_data_len",
            v2(ld(1, b"2.0") + ld(3, vf(1, 4) + vf(6, len(b))), b), "OpDebug",
            "overflow block at byte 20: data_len is smaller", opdebug=True)
    b, _ = new_block(1, 0, core + ["status"], data_len=8 * 14)  # version 1: 4 status words
    b = b[:24 + 8 * 12]
    hostile("opdebug_truncated_entry",
            v2(ld(1, b"2.0") + ld(3, vf(1, 4) + vf(6, len(b))), b), "OpDebug",
            "block ends inside a field", opdebug=True)

    with open(os.path.join(OUT, "manifest.json"), "w") as fh:
        json.dump(MANIFEST, fh, indent=1, sort_keys=True)
    total = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(OUT) for f in fs)
    print(f"wrote {len(MANIFEST['files'])} dump files, {len(MANIFEST['hostile'])} hostile files, "
          f"{total} bytes under {OUT}")


if __name__ == "__main__":
    sys.exit(main())
