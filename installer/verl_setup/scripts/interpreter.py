"""The interpreter probe: a Python describes itself, and what it has installed.

Run by path, without site (`-S`) for the bare questions, by host/interpreter.py: argv PARTS NAMES
REQUIRES (comma-separated), a Python literal on stdout. verify's Ray task runs `_interrogate` on
every node. It stays Python 2 compatible (type comments, no f-strings), so an old `python` on
PATH still answers, and imports nothing it was not asked for, so a scan of every interpreter on a
host stays quick.
"""

import sys

MYPY = False
if MYPY:  # type names for mypy only: the interpreter that runs this may have no `typing`
    from collections.abc import Sequence  # noqa: F401  # read in type comments
    from typing import Any  # noqa: F401


def _interrogate(parts=(), names="", requires=()):
    # type: (Sequence[str], str, Sequence[str]) -> dict[str, Any]
    # parts: "paths" (prefixes, sysconfig's purelib), "markers" (PEP 508 environment markers,
    # the host). names: "" no distributions, "*" every one, else comma-separated canonical names.
    import sys

    def full(info):
        # type: (Any) -> str
        v = "%d.%d.%d" % (info[0], info[1], info[2])
        return v if info[3] == "final" else v + info[3][0] + str(info[4])

    impl = getattr(sys, "implementation", None)
    # /proc/self/maps names the libpython actually loaded, which LD_LIBRARY_PATH can swap.
    lib = None
    try:
        for line in open("/proc/self/maps"):  # noqa: SIM115  # Python 2: read to the end, closed at exit
            fields = line.split()
            if len(fields) > 5 and "libpython" in fields[-1]:
                lib = fields[-1]
                break
    except Exception:  # noqa: S110  # no /proc: no libpython to name
        pass
    out = {
        "version": "%d.%d.%d" % tuple(sys.version_info[:3]),
        "full_version": full(sys.version_info),
        "implementation": getattr(impl, "name", "cpython"),
        "libpython": lib,
        "executable": sys.executable,
    }  # type: dict[str, Any]
    if "paths" in parts:  # a venv's prefix may be set by site (run without -S then)
        import sysconfig

        out["prefix"], out["base_prefix"] = sys.prefix, getattr(sys, "base_prefix", sys.prefix)
        out["purelib"] = sysconfig.get_paths()["purelib"]
    if "markers" in parts:
        import os
        import platform
        import socket

        out["platform"] = sys.platform + "-" + platform.machine()
        out["hostname"] = socket.gethostname()
        out["markers"] = {
            "implementation_name": getattr(impl, "name", "cpython"),
            "implementation_version": full(impl.version) if impl else "0",
            "os_name": os.name,
            "platform_machine": platform.machine(),
            "platform_release": platform.release(),
            "platform_system": platform.system(),
            "platform_version": platform.version(),
            "python_full_version": platform.python_version(),
            "platform_python_implementation": platform.python_implementation(),
            "python_version": ".".join(platform.python_version_tuple()[:2]),
            "sys_platform": sys.platform,
        }
    if names:
        import re

        wanted = None if names == "*" else set(names.split(","))
        dists = []
        quick = None if any(requires) else _quick_distributions()
        for name, version, location, dist in quick if quick is not None else _metadata_distributions():
            key = re.sub(r"[-_.]+", "-", name or "").lower()
            if name and (wanted is None or key in wanted):
                needs = list(dist.requires or []) if dist is not None and key in requires else None
                dists.append([name, version, location, needs])
        out["distributions"] = dists
    return out


def _metadata_distributions():
    # type: () -> list[tuple[str | None, str | None, str, Any]]
    try:
        import importlib.metadata as md

        found = md.distributions()  # type: Any
    except ImportError:  # before 3.8: no metadata to read
        found = ()
    rows = []
    for dist in found:
        meta = dist.metadata  # parsed once: dist.version would read the file again
        rows.append((meta["Name"], meta["Version"], str(dist.locate_file("")), dist))
    return rows


def _quick_distributions():
    # type: () -> list[tuple[str | None, str | None, str, Any]] | None
    # What importlib.metadata.distributions() finds on sys.path, read as it reads it (each folder's
    # *.dist-info / *.egg-info in listing order, METADATA, else PKG-INFO, else the file itself), but
    # only the header lines up to Version: its email parser and its import cost 0.1 s for a
    # 160-package environment. None (ask importlib.metadata) for what it reads differently: a zip
    # or .egg on sys.path, or a finder of its own on sys.meta_path.
    import os
    import re

    others = [f for f in sys.meta_path if getattr(f, "__name__", "") != "PathFinder"]
    if sys.version_info < (3, 8) or any(hasattr(f, "find_distributions") for f in others):
        return None
    rows = []  # type: list[tuple[str | None, str | None, str, Any]]
    for root in sys.path:
        folder = root or "."
        if root.endswith(".egg") or os.path.isfile(folder):
            return None
        try:
            children = os.listdir(folder)
        except OSError:
            continue
        groups = {}  # type: dict[str, list[str]]  # importlib.metadata groups a folder's by name
        for child in children:
            low = child.lower()
            if low.endswith((".dist-info", ".egg-info")):
                group = re.sub(r"[-_.]+", "_", low.rpartition(".")[0].partition("-")[0])
                groups.setdefault(group, []).append(child)
        location = os.path.normpath(folder)
        for child in [c for group in groups.values() for c in group]:
            name, version = _headers(os.path.join(folder, child))
            rows.append((name, version, location, None))
    return rows


def _headers(info):
    # type: (str) -> tuple[str | None, str | None]
    import os

    for path in (os.path.join(info, "METADATA"), os.path.join(info, "PKG-INFO"), info):
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                found = {}  # type: dict[str, str]
                for line in f:
                    if not line.strip():
                        break
                    key, colon, value = line.partition(":")
                    key = key.lower()
                    if colon and key in ("name", "version") and key not in found:
                        found[key] = value.lstrip().rstrip("\r\n")  # as its email parser keeps it
                        if len(found) == 2:
                            break
                return found.get("name"), found.get("version")
        except OSError:  # not there, or a folder: the next place importlib.metadata looks
            continue
    return None, None


if __name__ == "__main__":
    args = sys.argv[1:] + ["", "", ""]  # noqa: RUF005  # Python 2
    # A Python literal, not JSON: `import json` brings `re`, which doubles this child's start-up.
    sys.stdout.write(repr(_interrogate(args[0].split(","), args[1], args[2].split(","))))
