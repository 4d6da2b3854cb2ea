"""What a Ray started here would meet: the temp dir's space, proxies, verl's CPUs per GPU bundle,
and (scripts/ray_local.py) a throwaway Ray started for real. The CPUs it may use are host/resources.py's.
"""

from __future__ import annotations

import json
import re
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from verl_setup.scripts import script_path
from verl_setup.util.runner import ProgramError, run

LOCAL_TIMEOUT = 60.0  # ray.init, a placement group and one actor per bundle, under a hard kill
CHILD = script_path("ray_local")
_POOL_DEFAULT = re.compile(r"max_colocate_count: int = (\d+)")
_POOL_GIVEN = re.compile(r"RayResourcePool\([^)]*max_colocate_count=(\d+)")


def temp_dir(env: Mapping[str, str]) -> Path:
    """Ray's temp root: RAY_TMPDIR, else TMPDIR, else /tmp (its sessions live in <root>/ray)."""
    return Path(env.get("RAY_TMPDIR") or env.get("TMPDIR") or tempfile.gettempdir())


def proxy_without_bypass(env: Mapping[str, str], host: str) -> str | None:
    """The proxy variable gRPC would send Ray's traffic to `host` through, if no_proxy misses it."""
    proxy = next(
        (n for n in ("https_proxy", "HTTPS_PROXY", "http_proxy", "HTTP_PROXY", "grpc_proxy") if env.get(n)),
        None,
    )
    if proxy is None:
        return None
    bypass = [p.strip() for p in (env.get("no_proxy") or env.get("NO_PROXY") or "").split(",") if p.strip()]
    for entry in bypass:
        if entry in ("*", host) or host.endswith("." + entry.lstrip(".")):
            return None
        if "/" in entry and _in_cidr(host, entry):
            return None
    return proxy


def cpus_per_bundle(verl_site: Path) -> tuple[int, str] | None:
    """CPUs verl puts in each GPU's placement-group bundle (its max_colocate_count), from its code."""
    trainer = verl_site / "verl/trainer/ppo/ray_trainer.py"
    base = verl_site / "verl/single_controller/ray/base.py"
    for file, pattern, after in (
        (trainer, _POOL_GIVEN, ""),
        (base, _POOL_DEFAULT, "class ResourcePoolManager"),
    ):
        try:
            text = file.read_text(encoding="utf-8")
        except OSError:
            continue
        text = text[text.find(after) :] if after and after in text else ("" if after else text)
        m = pattern.search(text)
        if m:
            return int(m[1]), f"{file} (max_colocate_count={m[1]})"
    return None


def start_local_ray(
    python: str, env: Mapping[str, str], *, num_cpus: int | None, gpus: int, per_bundle: int
) -> dict[str, Any]:
    """Start a throwaway Ray in a fresh temp dir, place `gpus` bundles and an actor in each."""
    base = temp_dir(env)
    try:
        folder = tempfile.mkdtemp(prefix="vsr", dir=base)
    except OSError as exc:
        return {"error": f"cannot create a Ray temp dir in {base}: {exc}"}
    args = {"temp_dir": folder, "num_cpus": num_cpus, "gpus": gpus, "per_bundle": per_bundle, "timeout": 5}
    try:
        out = run([python, str(CHILD), json.dumps(args)], timeout=LOCAL_TIMEOUT, env=env, cwd=folder)
    except ProgramError as exc:
        return {"error": f"no answer within {LOCAL_TIMEOUT:g}s: {exc}", "hung": True}
    finally:
        _remove(Path(folder))
    try:
        result: dict[str, Any] = json.loads(out.stdout)
    except json.JSONDecodeError:
        tail = (out.stderr.strip().splitlines() or [f"exit {out.returncode}"])[-1]
        return {"error": tail}
    return dict(result, ran=True)


def _remove(folder: Path) -> None:
    import shutil  # noqa: PLC0415

    shutil.rmtree(folder, ignore_errors=True)


def _in_cidr(host: str, cidr: str) -> bool:
    import ipaddress  # noqa: PLC0415

    try:
        return ipaddress.ip_address(host) in ipaddress.ip_network(cidr, strict=False)
    except ValueError:
        return False
