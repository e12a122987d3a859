"""How a training state becomes bytes in a checkpoint, and back (docs/checkpointing.md).

`StateSerializer` (the default) writes the **gpu-policy-state/v1** format, which
cannot run code when read: a JSON description of the state's tree (dicts,
lists, tuples, str, int, float, bool, None) in which numpy arrays, numpy
scalars and bytes are references to raw buffers stored after it. Reading it
builds only those types; an array's dtype must be numeric (no object arrays).

`PickleSerializer` reads and writes any picklable state, and so runs whatever
code a checkpoint names when it is read: anyone who can write the checkpoint
location can then run code in the training pod. It is an explicit opt-in for
checkpoints whose location only trusted writers can reach.
"""

from __future__ import annotations

import json
import math
import pickle
import re
import struct
from typing import Any, Protocol

import numpy as np

from gpu_policy.errors import GpuPolicyError, InputError
from gpu_policy.model.safe_load import InputLimits, parse_json

MAGIC = b"GPSTATE1"
_LENGTH = struct.Struct("<Q")
_DTYPE = re.compile(r"[<>|=]?[biufc][0-9]{1,2}\Z")  # numeric dtypes only: never an object array
#: Depth of the JSON description: a dict costs three levels, so states may nest about 80 deep.
_LIMITS = InputLimits(max_bytes=1 << 40, max_depth=256)


class StateFormatError(GpuPolicyError):
    """A state cannot be written in, or read from, the checkpoint format."""


class Serializer(Protocol):
    name: str
    """Recorded in each manifest; a store reads only checkpoints of its own serializer."""

    def dumps(self, state: Any) -> bytes: ...

    def loads(self, data: bytes) -> Any: ...


class StateSerializer:
    """The default: plain data and numpy arrays, bit for bit, with no code run on load."""

    name = "gpu-policy-state/v1"

    def dumps(self, state: Any) -> bytes:
        blobs: list[bytes] = []
        tree = _encode(state, blobs, "state")
        offsets, at = [], 0
        for blob in blobs:
            offsets.append([at, len(blob)])
            at += len(blob)
        header = json.dumps({"tree": tree, "blobs": offsets}, separators=(",", ":")).encode()
        return b"".join([MAGIC, _LENGTH.pack(len(header)), header, *blobs])

    def loads(self, data: bytes) -> Any:
        if data[:len(MAGIC)] != MAGIC:
            raise StateFormatError(f"not in the {self.name} format (a pickle or torch checkpoint? "
                                   "those load only with their serializer, by opt-in)")
        start = len(MAGIC) + _LENGTH.size
        if len(data) < start:
            raise StateFormatError("the state is cut short")
        (size,) = _LENGTH.unpack_from(data, len(MAGIC))
        if size > len(data) - start:
            raise StateFormatError(f"the header claims {size} bytes, the state has {len(data) - start}")
        try:
            header = parse_json(data[start:start + size].decode("utf-8"), "state header", _LIMITS)
        except (UnicodeDecodeError, json.JSONDecodeError, InputError) as e:
            raise StateFormatError(f"the state header is not valid: {e}") from None
        body = memoryview(data)[start + size:]
        if not isinstance(header, dict) or not isinstance(header.get("blobs"), list) or "tree" not in header:
            raise StateFormatError("the state header lacks its tree or blobs")
        blobs = []
        for entry in header["blobs"]:
            if not (isinstance(entry, list) and len(entry) == 2 and all(_is_count(v) for v in entry)
                    and entry[0] + entry[1] <= len(body)):
                raise StateFormatError(f"a blob reference is out of range: {str(entry)[:60]}")
            blobs.append(body[entry[0]:entry[0] + entry[1]])
        return _decode(header["tree"], blobs)


#: a crafted header's bounds: numpy allows 64 dimensions, and no extent of real data nears 2^48
_MAX_DIMS, _MAX_EXTENT = 32, 2 ** 48
_INT = re.compile(r"-?[0-9]+")


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _encode(value: Any, blobs: list[bytes], path: str) -> Any:
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return value if abs(value) < 10 ** 18 else {"t": "int", "v": str(value)}
    if isinstance(value, float) and not isinstance(value, np.floating):
        return value if math.isfinite(value) else {"t": "float", "v": repr(value)}
    if isinstance(value, (bytes, bytearray)):
        blobs.append(bytes(value))
        return {"t": "bytes", "blob": len(blobs) - 1}
    if isinstance(value, (np.ndarray, np.generic)):
        array = np.asarray(value)
        if array.dtype.kind not in "biufc":
            raise StateFormatError(f"{path}: a numpy {array.dtype} cannot be saved (numbers only); "
                                   "PickleSerializer can, by opt-in")
        blobs.append(np.ascontiguousarray(array).tobytes())
        kind = "array" if isinstance(value, np.ndarray) else "scalar"
        return {"t": kind, "dtype": array.dtype.str, "shape": list(array.shape), "blob": len(blobs) - 1}
    if isinstance(value, list):
        return [_encode(v, blobs, f"{path}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, tuple):
        return {"t": "tuple", "items": [_encode(v, blobs, f"{path}[{i}]") for i, v in enumerate(value)]}
    if isinstance(value, dict):
        return {"t": "dict", "items": [[_encode(k, blobs, f"{path} key"), _encode(v, blobs, f"{path}[{k!r}]")]
                                       for k, v in value.items()]}
    raise StateFormatError(f"{path}: a {type(value).__name__} cannot be saved in the {StateSerializer.name} "
                           "format (plain data, numpy arrays and bytes); PickleSerializer can, by opt-in")


def _decode(node: Any, blobs: list[memoryview]) -> Any:
    if node is None or isinstance(node, (bool, int, float, str)):
        return node
    if isinstance(node, list):
        return [_decode(v, blobs) for v in node]
    if not isinstance(node, dict):
        raise StateFormatError("an entry of the state tree is malformed")
    kind = node.get("t")
    if kind in ("tuple", "dict") and not isinstance(node.get("items"), list):
        raise StateFormatError(f"a {kind} of the state tree has no items")
    if kind == "tuple":
        return tuple(_decode(v, blobs) for v in node["items"])
    if kind == "dict":
        return _decode_dict(node["items"], blobs)
    if kind == "int" and isinstance(node.get("v"), str) and len(node["v"]) <= 4000:
        return int(node["v"]) if _INT.fullmatch(node["v"]) else _bad(kind)
    if kind == "float" and node.get("v") in ("nan", "inf", "-inf"):
        return float(node["v"])
    return _decode_blob(node, kind, blobs)


def _decode_dict(items: list, blobs: list[memoryview]) -> dict:
    """A dict from its [key, value] pairs; each key must be hashable once decoded."""
    out = {}
    for pair in items:
        if not (isinstance(pair, list) and len(pair) == 2):
            raise StateFormatError("a dict entry of the state tree is malformed")
        key = _decode(pair[0], blobs)
        try:
            hash(key)  # a tuple holding a list is not hashable either
        except TypeError:
            raise StateFormatError("a dict key of the state is not hashable") from None
        out[key] = _decode(pair[1], blobs)
    return out


def _decode_blob(node: dict, kind: Any, blobs: list[memoryview]) -> Any:
    """Bytes, a numpy array or a numpy scalar, from the raw buffer the node names."""
    blob = node.get("blob")
    if not _is_count(blob) or blob >= len(blobs):
        return _bad(kind)
    if kind == "bytes":
        return bytes(blobs[blob])
    if kind in ("array", "scalar"):
        return _array(node, blobs[blob], kind)
    return _bad(kind)


def _array(node: dict, blob: memoryview, kind: str) -> Any:
    spelling = node.get("dtype")
    dtype = np.dtype(spelling) if isinstance(spelling, str) and _DTYPE.match(spelling) else None
    shape = node.get("shape")
    if dtype is None or not isinstance(shape, list) or not all(map(_is_count, shape)) or len(shape) > _MAX_DIMS or \
            any(d >= _MAX_EXTENT for d in shape):
        raise StateFormatError(f"an array of the state has a bad dtype or shape: {str(node)[:80]}")
    if math.prod(shape) * dtype.itemsize != len(blob):
        raise StateFormatError(f"an array of shape {shape} needs {math.prod(shape) * dtype.itemsize} bytes, "
                               f"its blob has {len(blob)}")
    array = np.frombuffer(blob, dtype=dtype).reshape(shape).copy()
    return array[()] if kind == "scalar" else array


def _bad(kind: Any) -> Any:
    raise StateFormatError(f"an entry of kind {str(kind)[:30]!r} in the state tree is malformed")


class PickleSerializer:
    """**Opt-in.** Any picklable state; reading runs the code a checkpoint names, so use it
    only where no untrusted party can write the checkpoint location."""

    name = "pickle"

    def dumps(self, state: Any) -> bytes:
        return pickle.dumps(state, protocol=pickle.HIGHEST_PROTOCOL)

    def loads(self, data: bytes) -> Any:
        return pickle.loads(data)  # noqa: S301 (opted in: the deployer trusts the checkpoint location)


__all__ = ["MAGIC", "PickleSerializer", "Serializer", "StateFormatError", "StateSerializer"]
