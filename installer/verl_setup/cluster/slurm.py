"""detect --slurm: `detect` on every node of the current Slurm allocation, as a cluster file.

Inside `salloc` or `sbatch` (SLURM_JOB_NODELIST set), one `srun --ntasks-per-node=1 --label`
step runs this interpreter on each node with this package on PYTHONPATH (Slurm clusters share the
install path; srun passes the environment on). Each task prints one JSON line; srun forwards every
task's output to us, so no shared scratch folder is needed. A node that printed nothing is kept
as missing with srun's words for it.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Mapping
from pathlib import Path

from verl_setup.errors import BadInputError, CheckFailedError
from verl_setup.host.cluster_file import Cluster, ClusterNode, MissingNode, now
from verl_setup.host.facts import host_from_data
from verl_setup.scripts import script_path
from verl_setup.util.bounded import one_line
from verl_setup.util.runner import ProgramError, run

_LABELLED = re.compile(r"^\s*(\d+): (.*)$")
_FAILED_NODE = re.compile(r"srun: error: ([^:\s]+): (.+)$")


def nodes_of(env: Mapping[str, str], *, timeout: float) -> list[str]:
    """The allocation's node names (`scontrol show hostnames` expands `gpu[01-16]`)."""
    nodelist = env.get("SLURM_JOB_NODELIST")
    if not nodelist:
        raise BadInputError(
            "detect --slurm runs inside a Slurm allocation (salloc or sbatch): SLURM_JOB_NODELIST is not set"
        )
    try:
        out = run(["scontrol", "show", "hostnames", nodelist], timeout=timeout, env=env)
    except ProgramError as exc:
        raise CheckFailedError(f"cannot expand SLURM_JOB_NODELIST {one_line(nodelist)!r}: {exc}") from exc
    if out.returncode != 0:
        raise CheckFailedError(f"scontrol show hostnames: {one_line(out.stderr.strip() or 'failed')}")
    return out.stdout.split()


def detect_slurm(env: Mapping[str, str], *, timeout: float) -> Cluster:
    """One detection task per node of the allocation, gathered; silent nodes are missing."""
    names = nodes_of(env, timeout=min(timeout, 30.0))
    package_parent = str(Path(__file__).resolve().parents[2])
    task_env = dict(env)
    task_env["PYTHONPATH"] = os.pathsep.join([package_parent, *filter(None, [env.get("PYTHONPATH")])])
    argv = ["srun", f"--nodes={len(names)}", "--ntasks-per-node=1", "--label", "--overlap"]
    argv += ["--kill-on-bad-exit=0", sys.executable, str(script_path("slurm_detect")), names[0]]
    failed: dict[str, str] = {}
    try:
        out = run(argv, timeout=timeout, env=task_env)
        stdout, stderr = out.stdout, out.stderr
        for line in stderr.splitlines():
            m = _FAILED_NODE.search(line)
            if m:
                failed[m[1]] = m[2]
        if out.returncode and not failed:
            last = stderr.strip().splitlines()[-1] if stderr.strip() else "no message"
            failed[""] = f"srun exit {out.returncode}: {one_line(last)}"
    except ProgramError as exc:
        stdout, failed[""] = exc.stdout, str(exc)
    # srun --label cuts a task's output every 1024 bytes, each piece labelled: each task prints one
    # JSON line, so its pieces joined in order are that line.
    pieces: dict[str, list[str]] = {}
    for line in stdout.splitlines():
        m = _LABELLED.match(line)
        if m:
            pieces.setdefault(m[1], []).append(m[2])
    answers = {}
    for task, parts in pieces.items():
        try:
            data = json.loads("".join(parts))
        except ValueError:
            failed.setdefault("", f"task {task} printed something other than its facts")
            continue
        answers[data["node"]] = data
    nodes, missing = [], []
    for index, name in enumerate(names):
        data = answers.get(name)
        if data is None:
            reason = failed.get(name) or failed.get("") or "its srun task printed no facts"
            missing.append(MissingNode(name=name, ip=None, reason=reason))
            continue
        host = host_from_data(data["host"], f"Slurm node {name}")
        nodes.append(
            ClusterNode(
                name=name,
                ip=None,
                hostname=data["hostname"],
                head=index == 0,
                host=host,
                iface_to_head=data.get("iface_to_head"),
            )
        )
    job = env.get("SLURM_JOB_ID")
    return Cluster(
        nodes=tuple(nodes),
        missing=tuple(missing),
        how="slurm",
        address=f"job {job}" if job else None,
        gathered_at=now(),
        tool="srun",
    )
