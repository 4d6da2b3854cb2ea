"""install --ray's tasks (cluster/install.py), run on each node by ray_every_node.py: `_fs` looks
for a marker file to tell a shared prefix from per-node disks; `_install` runs verl-setup there."""

from __future__ import annotations

from typing import Any


def _fs(step: str, folder: str, marker: str) -> dict[str, Any]:
    import os
    import socket

    os.makedirs(folder, exist_ok=True)  # the prefix's parent, as install makes it
    path = os.path.join(folder, marker)
    if step == "write":
        with open(path, "w") as f:
            f.write(socket.gethostname())
    seen = os.path.exists(path)
    if step == "remove" and seen:
        os.unlink(path)
    real, best, fstype = os.path.realpath(folder), "", "unknown"
    with open("/proc/self/mountinfo") as f:  # the longest mount point above the folder
        for line in f:
            left, _, right = line.partition(" - ")
            point = left.split()[4].replace("\\040", " ")
            if (real == point or real.startswith(point.rstrip("/") + "/")) and len(point) >= len(best):
                best, fstype = point, right.split()[0]
    return {"seen": seen, "fstype": fstype, "mount": best, "hostname": socket.gethostname()}


def _install(reach: str, argv: list[str]) -> dict[str, Any]:
    import ctypes
    import json
    import os
    import signal
    import socket
    import subprocess
    import sys
    import time

    started, env = time.monotonic(), dict(os.environ)
    if reach == "installed":
        cmd = ["verl-setup", *argv]
    else:  # the package Ray shipped (py_modules), run by this worker's Python
        import verl_setup

        root = os.path.dirname(os.path.dirname(os.path.abspath(verl_setup.__file__)))
        env["PYTHONPATH"] = os.pathsep.join([root, *([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])])
        cmd = [sys.executable, "-m", "verl_setup", *argv]
    libc = ctypes.CDLL(None, use_errno=True)

    def die_with_worker() -> None:  # PR_SET_PDEATHSIG: a killed node's install stops, its staging dir stays
        libc.prctl(1, signal.SIGKILL)

    try:
        out = subprocess.run(  # the child must die with this worker
            cmd, capture_output=True, text=True, env=env, preexec_fn=die_with_worker, check=False
        )
    except FileNotFoundError:
        raise RuntimeError(  # noqa: B904  # the node's words, not the lookup's
            "no verl-setup on this node's PATH (install it, or leave out --installed)"
        )
    lines = [ln for ln in out.stderr.splitlines() if ln.startswith("verl-setup: ")]
    try:
        result = json.loads(out.stdout)
    except ValueError:
        result = None
    return {
        "hostname": socket.gethostname(),
        "returncode": out.returncode,
        "result": result,
        "error": (lines or out.stderr.strip().splitlines() or [""])[-1][:500],
        "seconds": round(time.monotonic() - started, 1),
    }
