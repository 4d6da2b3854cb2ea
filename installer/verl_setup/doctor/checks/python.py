"""Check `python`: the env's exact Python against the matrix row, the libpython that really loads,
and the interpreter Ray's workers will run instead of this env's."""

from __future__ import annotations

import os
from pathlib import Path

from verl_setup.doctor.context import Context
from verl_setup.doctor.probes.env import TargetEnv
from verl_setup.doctor.result import CheckResult, Evidence, Finding, fold, skip
from verl_setup.util.versions import minor_of

ID = "python"
PY_EXECUTABLE_KEY = "ray_kwargs.ray_init.runtime_env.py_executable"


def check_python(ctx: Context) -> CheckResult:
    """Version vs row, --version vs libpython vs pyvenv.cfg, env vs Ray workers."""
    target, why = ctx.target
    if target is None:
        return skip(ID, why)
    py = target.interpreter
    evidence = [
        Evidence(name="python", value=target.python, source=target.source),
        Evidence(name="running", value=py.version, source="sys.version_info of the loaded libpython"),
        Evidence(
            name="--version", value=str(py.version_flag), source=f"{Path(target.python).name} --version"
        ),
        Evidence(name="libpython", value=str(py.libpython or "linked statically"), source="/proc/self/maps"),
        Evidence(name="home", value=target.base_prefix, source="sys.base_prefix"),
    ]
    if target.pyvenv_version:
        evidence.append(Evidence(name="venv made for", value=target.pyvenv_version, source="pyvenv.cfg"))
    findings = _row(ctx, target, evidence)
    findings += _libpython(ctx, target)
    findings += _ray_workers(ctx, target, evidence)
    return fold(ID, findings, evidence, ok=f"Python {py.version}")


def _row(ctx: Context, target: TargetEnv, evidence: list[Evidence]) -> list[Finding]:
    row, how = ctx.row
    if row is None:
        evidence.append(Evidence(name="row", value="none", source=how))
        return [Finding(status="pass", message=f"Python {target.version} (no matrix row to compare: {how})")]
    evidence.append(Evidence(name="row", value=row.id, source=how))
    minor = minor_of(target.version)
    supported = ", ".join(row.python.supported)
    if minor in row.python.supported:
        return [
            Finding(
                status="pass",
                message=f"Python {target.version}: row {row.id} supports {supported} "
                f"(installs {row.python.recommended})",
            )
        ]
    newest = max(row.python.supported, key=lambda v: tuple(map(int, v.split("."))))
    too_new = tuple(map(int, minor.split("."))) > tuple(map(int, newest.split(".")))
    why = " (3.12+ breaks older pins: wheels and pydantic/typing_extensions builds)" if too_new else ""
    return [
        Finding(
            status="fail",
            message=f"Python {target.version} is not supported by row {row.id} "
            f"(verl {row.verl.version}: {supported}){why}",
            remedy=f"recreate the env with Python {row.python.recommended}: "
            f"verl-setup install --python {row.python.recommended}",
        )
    ]


def _libpython(ctx: Context, target: TargetEnv) -> list[Finding]:
    """Three ways the loaded interpreter differs from the one the env was made with."""
    py = target.interpreter
    findings = []
    if py.mismatch:
        findings.append(
            Finding(
                status="fail",
                message=py.mismatch,
                remedy="call the env's interpreter by its full path, and check `which python`",
            )
        )
    lib_dir = str(Path(py.libpython).parent) if py.libpython else None
    culprit = [
        d for d in ctx.env.get("LD_LIBRARY_PATH", "").split(os.pathsep) if d and lib_dir and _same(d, lib_dir)
    ]
    via = f" (LD_LIBRARY_PATH has {culprit[0]})" if culprit else ""
    fix = f"remove {culprit[0]} from LD_LIBRARY_PATH" if culprit else "recreate the env"
    if target.pyvenv_version and target.pyvenv_version != py.version:
        findings.append(
            Finding(
                status="fail",
                message=f"the env was made for Python {target.pyvenv_version} (pyvenv.cfg) but "
                f"libpython {py.version} loads from {py.libpython}{via}",
                remedy=f"{fix}; compiled extensions built for {target.pyvenv_version} may crash",
            )
        )
    elif py.libpython and not _inside(py.libpython, target.base_prefix):
        findings.append(
            Finding(
                status="warn",
                message=f"libpython loads from {py.libpython}, outside the interpreter's home "
                f"{target.base_prefix}{via}",
                remedy=fix,
            )
        )
    return findings


def _ray_workers(ctx: Context, target: TargetEnv, evidence: list[Evidence]) -> list[Finding]:
    """Ray starts workers with the raylet's interpreter, not this env's, unless py_executable says so."""
    reading = ctx.ray
    if reading is None or not reading.workers:
        return []
    given = ctx.launch.override(PY_EXECUTABLE_KEY) if ctx.launch else None
    findings = []
    for worker in reading.workers:
        python = given.value if given and given.value else worker.python
        source = (
            f"launch {PY_EXECUTABLE_KEY}" if given else f"raylet on {worker.node} (--python_worker_command)"
        )
        evidence.append(Evidence(name="ray workers", value=python, source=source))
        if not _same(str(Path(python).parent.parent), target.prefix):
            findings.append(
                Finding(
                    status="fail",
                    message=f"Ray workers on {worker.node} run {python}, not this env's {target.python}: "
                    "they will not see the packages installed here",
                    remedy=f"restart that node's Ray from this env ({Path(target.python).parent}/ray "
                    f"start ...), or set {PY_EXECUTABLE_KEY}={target.python} if this verl has that key",
                )
            )
    return findings


def _same(a: str, b: str) -> bool:
    return os.path.normpath(a) == os.path.normpath(b)


def _inside(path: str, folder: str) -> bool:
    return os.path.normpath(path).startswith(os.path.normpath(folder) + os.sep)
