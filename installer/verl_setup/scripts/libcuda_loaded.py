"""doctor cuda: which libcuda the dynamic loader really maps in the target interpreter, and its
driver API version (JSON: {"path", "api"} or {"error"})."""

from __future__ import annotations

import ctypes
import json

try:
    lib = ctypes.CDLL("libcuda.so.1")
except OSError as exc:
    print(json.dumps({"error": str(exc)}))
    raise SystemExit(0) from None
version = ctypes.c_int(0)
fn = getattr(lib, "cuDriverGetVersion", None)
api = version.value if fn is not None and fn(ctypes.byref(version)) == 0 else None
with open("/proc/self/maps") as maps:
    paths = [ln.split()[-1] for ln in maps if "libcuda.so" in ln]
print(json.dumps({"path": paths[0] if paths else None, "api": api}))
