"""What each interpreter said about itself, kept per binary, as uv keeps its interpreter queries.

Asking every Python on a host (the child and `--version`, two programs each) costs about 0.1 s of
every plan, install and doctor on a 2-core machine with nine of them. An answer is reused only
while it is the same binary: the same file (device, inode, size, times) at the same real path,
the libpython it loaded unchanged, and the same loader variables. A script launcher (a shim, a
wrapper) is asked every time: what it runs can change under it with no file of ours changing.
Any problem with the cache (no writable folder, a torn or foreign file) only means asking.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from verl_setup.util.paths import tool_cache_dir

FILE = "interpreters.json"
SCHEMA = 1
# What changes the answer of the same binary: which libpython it loads, its prefix.
LOADER_VARIABLES = ("LD_LIBRARY_PATH", "LD_PRELOAD", "PYTHONHOME", "PYTHONEXECUTABLE")
FIELDS = ("version", "implementation", "version_flag", "libpython")
MAX_ENTRIES = 64


def _identity(path: str) -> list[int] | None:
    """The file as the kernel knows it; None when it is not a regular file."""
    try:
        info = Path(path).stat()
    except OSError:
        return None
    if not stat.S_ISREG(info.st_mode):
        return None
    return [info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns]


def _is_binary(path: str) -> bool:
    try:
        with Path(path).open("rb") as f:
            return f.read(4) == b"\x7fELF"
    except OSError:
        return False


class InterpreterCache:
    """Load once, look up and add from the detection threads, save once."""

    def __init__(self, env: Mapping[str, str]) -> None:
        self.path = tool_cache_dir(env) / FILE
        self.loader = [env.get(name, "") for name in LOADER_VARIABLES]
        self.entries: dict[str, dict[str, Any]] = {}
        self.changed = False
        try:
            with self.path.open("rb") as f:
                info = os.fstat(f.fileno())
                # Our own file, writable by no one else: only then are its facts ours.
                if info.st_uid == os.getuid() and not info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
                    data = json.loads(f.read(4 * 2**20))
                    if data.get("schema") == SCHEMA and isinstance(data.get("entries"), dict):
                        self.entries = data["entries"]
        except (OSError, ValueError, AttributeError):
            self.entries = {}

    def _stamp(self, exe: Path) -> dict[str, Any] | None:
        real = os.path.realpath(exe)
        identity = _identity(real)
        if identity is None or not _is_binary(real):
            return None
        return {"real": real, "identity": identity, "loader": self.loader}

    def get(self, exe: Path) -> dict[str, Any] | None:
        """The answer kept for `exe`, when it is still the same binary loading the same library."""
        entry = self.entries.get(str(exe))
        stamp = self._stamp(exe)
        if not isinstance(entry, dict) or stamp is None or entry.get("stamp") != stamp:
            return None
        answer = entry.get("answer")
        if not isinstance(answer, dict) or set(answer) != set(FIELDS):
            return None
        lib = answer["libpython"]
        if lib is not None and _identity(str(lib)) != entry.get("libpython_identity"):
            return None
        return answer

    def put(self, exe: Path, answer: Mapping[str, Any]) -> None:
        """Keep `answer` (FIELDS) for a binary; a launcher script is not kept."""
        stamp = self._stamp(exe)
        if stamp is None:
            return
        lib = answer.get("libpython")
        self.entries[str(exe)] = {
            "stamp": stamp,
            "answer": {k: answer.get(k) for k in FIELDS},
            "libpython_identity": None if lib is None else _identity(str(lib)),
        }
        self.changed = True

    def save(self) -> None:
        """Write atomically when something was added; fail silently (a read-only home)."""
        if not self.changed:
            return
        import tempfile  # noqa: PLC0415  # only a miss writes

        entries = dict(list(self.entries.items())[-MAX_ENTRIES:])
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            fd, temp = tempfile.mkstemp(dir=self.path.parent, prefix=".tmp-")
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as f:
                    json.dump({"schema": SCHEMA, "entries": entries}, f)
                Path(temp).replace(self.path)
            except BaseException:
                Path(temp).unlink(missing_ok=True)
                raise
        except OSError:
            return
