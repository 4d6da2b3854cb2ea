"""Read safetensors files without torch: the header (JSON) and each tensor's values as floats.

The smoke run compares the saved weights with the initial ones here, in the tool's own interpreter;
the format is an 8-byte little-endian header length, the JSON header, then the raw tensors.
"""

from __future__ import annotations

import json
import struct
from array import array
from pathlib import Path

_CODES = {"F32": "f", "F64": "d", "F16": "e"}


def tensors(path: Path) -> dict[str, tuple[str, bytes]]:
    """name -> (dtype, raw bytes) of every tensor in the file."""
    data = path.read_bytes()
    (length,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + length])
    body = data[8 + length :]
    return {
        name: (str(info["dtype"]), body[info["data_offsets"][0] : info["data_offsets"][1]])
        for name, info in header.items()
        if name != "__metadata__"
    }


def as_floats(dtype: str, raw: bytes) -> list[float]:
    """The values of a float tensor (F32, F64, F16, BF16)."""
    if dtype == "BF16":  # the top half of an F32
        halves = array("H", raw)
        return list(array("f", struct.pack(f"<{len(halves)}I", *(h << 16 for h in halves))))
    code = _CODES.get(dtype)
    if code is None:
        raise ValueError(f"not a float tensor: {dtype}")
    if code == "e":
        return list(struct.unpack(f"<{len(raw) // 2}e", raw))
    return list(array(code, raw))


def to_bf16(value: float) -> float:
    """A float rounded to bfloat16 (round to nearest even), so F32 and BF16 copies compare."""
    (bits,) = struct.unpack("<I", struct.pack("<f", value))
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return float(struct.unpack("<f", struct.pack("<I", bits))[0])


def changed(before: tuple[str, bytes], after: tuple[str, bytes]) -> bool:
    """Whether a tensor's values differ, at the coarser of the two precisions."""
    if before[0] == after[0]:
        return before[1] != after[1]
    old, new = as_floats(*before), as_floats(*after)
    if len(old) != len(new):
        return True
    if "BF16" in (before[0], after[0]):
        old, new = [to_bf16(v) for v in old], [to_bf16(v) for v in new]
    return old != new
