"""Check `hf-cache`: one Hugging Face cache, writable (proved by writing), with room for the model.

Paths are resolved the way huggingface_hub does: its own constants, computed by the env's (or our)
huggingface_hub under the doctor's environment, else the same rules written out here. Tokens are
never read: only path and switch variables are.
"""

from __future__ import annotations

import errno
import importlib.util
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from verl_setup.doctor.context import Context
from verl_setup.doctor.probes.hf_paths import expand, hf_home, hub_cache
from verl_setup.doctor.result import CheckResult, Evidence, Finding, fold
from verl_setup.scripts import script_path
from verl_setup.util.runner import ProgramError, run

ID = "hf-cache"
GIB = 2**30
MIN_TMP_GIB = 1.0
HF_TIMEOUT = 10.0
_TRUE = {"1", "on", "yes", "true"}


@dataclass(frozen=True, kw_only=True)
class HfPaths:
    """Where models go, and which setting said so."""

    home: str
    hub: str
    source: str
    offline: bool
    transformers: str | None


def resolve_paths(env: Mapping[str, str], constants: dict[str, object] | None, source: str) -> HfPaths:
    """huggingface_hub's values when given, else its documented rules applied to `env`."""
    home, hub = hf_home(env), hub_cache(env)
    offline = any(env.get(n, "").lower() in _TRUE for n in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"))
    if constants is not None:
        home, hub = str(constants["HF_HOME"]), str(constants["HF_HUB_CACHE"])
        offline = bool(constants["HF_HUB_OFFLINE"])
    names = ("TRANSFORMERS_CACHE", "PYTORCH_TRANSFORMERS_CACHE", "PYTORCH_PRETRAINED_BERT_CACHE")
    legacy = next((env[n] for n in names if env.get(n)), None)
    return HfPaths(
        home=home,
        hub=hub,
        source=source,
        offline=offline,
        transformers=expand(legacy, env) if legacy else None,
    )


def hub_constants(ctx: Context) -> tuple[dict[str, object] | None, str]:
    """huggingface_hub's own constants, from the env's copy or ours, under the doctor's env."""
    target, _ = ctx.target
    pythons = []
    if target is not None and "huggingface-hub" in target.dists:
        pythons.append(target.python)
    if importlib.util.find_spec("huggingface_hub") is not None:
        pythons.append(sys.executable)
    for python in pythons:
        try:
            out = run([python, str(script_path("hf_constants"))], timeout=HF_TIMEOUT, env=ctx.env)
            data = json.loads(out.stdout) if out.returncode == 0 else None
        except (ProgramError, json.JSONDecodeError):
            continue
        if isinstance(data, dict):
            return data, f"huggingface_hub {data.get('version')} constants ({python})"
    return None, "huggingface_hub's rules (HF_HOME, HF_HUB_CACHE, XDG_CACHE_HOME; not installed)"


def nearest_existing(folder: Path) -> tuple[Path | None, str | None]:
    """The folder, or the closest parent that exists (huggingface_hub creates the rest)."""
    current = folder
    while True:
        try:
            current.stat()
        except (FileNotFoundError, NotADirectoryError):
            if current.parent == current:
                return None, f"no part of {folder} exists"
            current = current.parent
            continue
        except PermissionError as exc:
            return None, f"cannot look into {current.parent}: {exc.strerror}"
        return current, None


def probe_writable(folder: Path) -> tuple[bool, str]:
    """Prove write access by creating and removing a file (file modes lie for root and ACLs)."""
    base, why = nearest_existing(folder)
    if base is None:
        return False, str(why)
    try:
        fd, name = tempfile.mkstemp(prefix=".verl-setup-doctor-", dir=base)
        os.close(fd)
        Path(name).unlink()
    except OSError as exc:
        code = errno.errorcode.get(exc.errno or 0, "?")
        return False, f"cannot create a file in {base}: {exc.strerror} ({code})"
    where = "" if base == folder else f" (missing; would be created under {base})"
    return True, f"wrote and removed a file in {base}{where}"


def free_gib(folder: Path) -> float | None:
    """Free space where `folder` is (or would be created)."""
    base, _ = nearest_existing(folder)
    if base is None:
        return None
    try:
        return shutil.disk_usage(base).free / GIB
    except OSError:
        return None


def check_hf_cache(ctx: Context) -> CheckResult:
    """Resolve, prove writable, measure free space, and catch the offline and two-cache traps."""
    constants, source = hub_constants(ctx)
    paths = resolve_paths(ctx.env, constants, source)
    need, need_source = ctx.model_size_gib
    tmp = ctx.env.get("TMPDIR") or ctx.env.get("TEMP") or ctx.env.get("TMP") or "/tmp"  # noqa: S108
    model = _hub_model(ctx)
    return cache_result(paths, need=need, need_source=need_source, tmp=Path(tmp), model=model)


def cache_result(
    paths: HfPaths, *, need: float, need_source: str, tmp: Path, model: str | None
) -> CheckResult:
    """The filesystem half of the check (separate so it can run as another user)."""
    evidence = [
        Evidence(name="HF_HOME", value=paths.home, source=paths.source),
        Evidence(name="hub cache", value=paths.hub, source=paths.source),
        Evidence(name="model size", value=f"{need:g} GiB", source=need_source),
    ]
    findings = []
    if paths.transformers and os.path.normpath(paths.transformers) != os.path.normpath(paths.hub):
        evidence.append(Evidence(name="TRANSFORMERS_CACHE", value=paths.transformers, source="environment"))
        findings.append(
            Finding(
                status="warn",
                message=f"two caches: transformers reads TRANSFORMERS_CACHE={paths.transformers}, "
                f"huggingface_hub downloads to {paths.hub}: a model one fetched, the other does not find",
                remedy="unset TRANSFORMERS_CACHE (deprecated) and set only HF_HOME, on every node",
            )
        )
    for folder in dict.fromkeys([paths.hub, paths.home]):
        ok, detail = probe_writable(Path(folder))
        evidence.append(Evidence(name="write test", value=detail, source=folder))
        if not ok:
            findings.append(
                Finding(
                    status="fail",
                    message=f"the Hugging Face cache {folder} is not writable: {detail}",
                    remedy="export HF_HOME=<a writable folder with room for the model> (on every node), "
                    "or fix the folder's owner",
                )
            )
    findings += _space(paths, need, tmp, evidence)
    findings += _offline(paths, model, evidence)
    return fold(ID, findings, evidence, ok=f"cache {paths.hub}: writable, room for the model")


def _space(paths: HfPaths, need: float, tmp: Path, evidence: list[Evidence]) -> list[Finding]:
    findings = []
    cache_free, tmp_free = free_gib(Path(paths.hub)), free_gib(tmp)
    evidence.append(Evidence(name="free in cache", value=_gib(cache_free), source=f"statvfs {paths.hub}"))
    evidence.append(Evidence(name="free in temp", value=_gib(tmp_free), source=f"statvfs {tmp}"))
    if cache_free is not None and cache_free < need:
        findings.append(
            Finding(
                status="fail",
                message=f"{cache_free:.1f} GiB free for the cache {paths.hub}, the model needs {need:g} GiB",
                remedy="free space there, or export HF_HOME to a larger disk",
            )
        )
    if tmp_free is not None and tmp_free < MIN_TMP_GIB:
        findings.append(
            Finding(
                status="fail",
                message=f"the temp dir {tmp} is full ({tmp_free:.2f} GiB free): Ray sessions, "
                "downloads and compile caches fail there",
                remedy=f"free space in {tmp}, or export TMPDIR (and RAY_TMPDIR) to a larger disk",
            )
        )
    elif tmp_free is not None and tmp_free < need:
        findings.append(
            Finding(
                status="warn",
                message=f"{tmp_free:.1f} GiB free in the temp dir {tmp}, less than the model's {need:g} GiB",
                remedy=f"export TMPDIR (and RAY_TMPDIR) to a disk with more than {need:g} GiB free",
            )
        )
    return findings


def _offline(paths: HfPaths, model: str | None, evidence: list[Evidence]) -> list[Finding]:
    if not paths.offline:
        return []
    hub = Path(paths.hub)
    try:
        cached = sorted(p.name for p in hub.iterdir() if p.name.startswith("models--"))
    except OSError:
        cached = []
    evidence.append(Evidence(name="offline", value="HF_HUB_OFFLINE is on", source=paths.source))
    evidence.append(Evidence(name="cached models", value=str(len(cached)), source=str(hub)))
    if model and f"models--{model.replace('/', '--')}" not in cached:
        return [
            Finding(
                status="fail",
                message=f"offline mode, and {model} is not in the cache {hub}",
                remedy=f"download it first (hf download {model}) or unset HF_HUB_OFFLINE",
            )
        ]
    if not cached:
        return [
            Finding(
                status="fail",
                message=f"HF_HUB_OFFLINE is on and the cache {hub} holds no model: every load fails",
                remedy="download the model first (hf download <repo>), or unset HF_HUB_OFFLINE",
            )
        ]
    return []


def _hub_model(ctx: Context) -> str | None:
    """The launch command's model path, when it names a Hub repository rather than a folder."""
    if ctx.launch is None:
        return None
    given = ctx.launch.override("actor_rollout_ref.model.path")
    value = given.value if given else None
    if not value or value.startswith(("/", ".", "~")) or value.count("/") != 1 or Path(value).exists():
        return None
    return value


def _gib(value: float | None) -> str:
    return "unknown" if value is None else f"{value:.1f} GiB"
