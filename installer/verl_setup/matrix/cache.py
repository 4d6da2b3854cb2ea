"""The parsed-matrix cache: a validated matrix file kept as a pickle, so `plan` skips parsing YAML.

Keyed by the bytes of the files parsed and of the code that parses them, so an edited file or an
upgraded verl-setup is parsed again; it lives in the user's cache folder, never beside the
package, so a read-only install (site-packages owned by root) caches all the same. Any problem
with the cache (no writable folder, a torn or foreign file) only means parsing as before.
"""

from __future__ import annotations

import functools
import hashlib
import os
import pickle
import stat
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

from verl_setup import __version__
from verl_setup.util.bounded import BoundError, read_capped
from verl_setup.util.paths import tool_cache_dir

T = TypeVar("T")
STALE_S = 30 * 86400  # entries of other files not written for a month go (temporary matrices)
MAX_SOURCE = 4 * 2**20  # as util/yamlread.py: a larger file is refused there, not hashed here
_PACKAGE = Path(__file__).resolve().parent.parent


@functools.cache
def _code_fingerprint() -> bytes:
    """What the pickled objects' shape depends on: this version, this Python, the parsing code."""
    h = hashlib.sha256(f"{__version__}\0{sys.version}\0".encode())
    for folder in ("matrix", "util"):
        for source in sorted((_PACKAGE / folder).glob("*.py")):
            h.update(source.name.encode() + b"\0" + source.read_bytes())
    return h.digest()


def cached(kind: str, sources: Sequence[Path], expected: type[T], build: Callable[[], T]) -> T:
    """build()'s result for these source files, from the cache when their bytes are unchanged.

    Only a successful build is stored; a file that cannot be read goes to build(), which reports it.
    """
    try:
        key = hashlib.sha256(_code_fingerprint())
        for source in sources:
            key.update(str(source).encode() + b"\0" + read_capped(source, MAX_SOURCE, "matrix file") + b"\0")
    except (OSError, BoundError):
        return build()
    folder = tool_cache_dir() / "parsed"
    where = hashlib.sha256(str(sources[0]).encode()).hexdigest()[:12]
    entry = folder / f"{kind}-{where}-{key.hexdigest()[:32]}.pickle"
    found = _read(entry, expected)
    if found is not None:
        return found
    value = build()
    _write(entry, f"{kind}-{where}-", value)
    return value


def _read(entry: Path, expected: type[T]) -> T | None:
    try:
        with entry.open("rb") as f:
            info = os.fstat(f.fileno())
            # Our own file, writable by no one else: only then is unpickling it safe.
            if info.st_uid != os.getuid() or info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
                return None
            value = pickle.load(f)  # noqa: S301  # written by this user, see above
    except Exception:  # noqa: BLE001  # a missing, torn or stale entry: parse instead
        return None
    return value if isinstance(value, expected) else None


def _write(entry: Path, prefix: str, value: object) -> None:
    """Store atomically, replacing this file's older entries; fail silently (a read-only home).

    A hit does not refresh an entry's time, so "a month" counts from the write (a month-old
    entry in use is written again once, after it goes)."""
    import tempfile  # noqa: PLC0415  # only a miss writes

    try:
        entry.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        data = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
        fd, temp = tempfile.mkstemp(dir=entry.parent, prefix=".tmp-")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            Path(temp).replace(entry)
        except BaseException:
            Path(temp).unlink(missing_ok=True)
            raise
        stale = time.time() - STALE_S
        for old in entry.parent.glob("*.pickle"):
            if old != entry and (old.name.startswith(prefix) or old.stat().st_mtime < stale):
                old.unlink(missing_ok=True)
    except (OSError, pickle.PicklingError, TypeError, AttributeError):
        return
