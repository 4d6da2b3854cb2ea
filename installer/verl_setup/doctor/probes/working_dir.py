"""The runtime_env working_dir a launch uploads to Ray, and how big it is after its excludes.

Ray zips working_dir and refuses a package over its gRPC message limit (512 MiB in Ray 2.60,
RAY_max_grpc_message_size overrides it). Weights do not compress, so the files' sizes are what
the upload costs. Excludes follow Ray's gitignore-style patterns for the common forms
(`/anchored/`, `dir/`, `*.ext`); Ray also honours .gitignore, which this reader does not.
"""

from __future__ import annotations

import fnmatch
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from verl_setup.doctor.probes.launch_command import Launch, hydra_value

RAY_UPLOAD_LIMIT = 512 * 1024 * 1024  # ray_constants.GRPC_CPP_MAX_MESSAGE_SIZE (Ray 2.60)
WD_KEY = "ray_kwargs.ray_init.runtime_env.working_dir"


@dataclass(frozen=True, kw_only=True)
class WorkingDir:
    """A working_dir, the excludes that apply to it, and where the launch named it."""

    path: Path
    excludes: tuple[str, ...]
    source: str


def find_working_dir(launch: Launch, cwd: Path) -> WorkingDir | None:
    """From `ray job submit --working-dir/--runtime-env[-json]` or verl's runtime_env override."""
    before = list(launch.argv[: launch.argv.index("--")]) if "--" in launch.argv else []
    given = _flag(before, "--working-dir")
    runtime: dict[str, Any] = {}
    source = ""
    file = _flag(before, "--runtime-env")
    if file:
        from verl_setup.util.yamlread import YamlError, read_yaml  # noqa: PLC0415  # only a launch lint needs YAML

        try:
            loaded = read_yaml(cwd / file)[0]  # bounded: a FIFO or an alias bomb is refused, not read
            runtime, source = (loaded if isinstance(loaded, dict) else {}), f"--runtime-env {file}"
        except YamlError:
            runtime = {}
    text = _flag(before, "--runtime-env-json")
    if text:
        try:
            runtime, source = json.loads(text), "--runtime-env-json"
        except ValueError:
            runtime = {}
    override = launch.override(WD_KEY)
    if given:
        folder, source = given, "--working-dir"
    elif runtime.get("working_dir"):
        folder = str(runtime["working_dir"])
    elif override is not None and override.value:
        folder, source = str(hydra_value(override.value)), f"launch {WD_KEY}"
    else:
        return None
    excludes = runtime.get("excludes") or []
    return WorkingDir(path=(cwd / folder).resolve(), excludes=tuple(str(e) for e in excludes), source=source)


def package_size(wd: WorkingDir) -> tuple[int, list[tuple[int, str]]]:
    """Total bytes that would be zipped, and the five biggest files (size, relative path)."""
    total = 0
    sizes: list[tuple[int, str]] = []
    for root, dirs, files in os.walk(wd.path):
        rel_root = Path(root).relative_to(wd.path)
        dirs[:] = [d for d in dirs if not excluded((rel_root / d).as_posix() + "/", wd.excludes)]
        for name in files:
            rel = (rel_root / name).as_posix()
            if excluded(rel, wd.excludes):
                continue
            try:
                size = (Path(root) / name).lstat().st_size
            except OSError:
                continue
            total += size
            sizes.append((size, rel))
    return total, sorted(sizes, reverse=True)[:5]


def excluded(rel: str, patterns: Sequence[str]) -> bool:
    """Ray's exclude rule for the common gitignore forms; `rel` ends in / for a directory."""
    is_dir = rel.endswith("/")
    path = rel.rstrip("/")
    name = path.rsplit("/", 1)[-1]
    for raw in patterns:
        pattern = raw.strip()
        core = pattern.strip("/")
        if not core or (pattern.endswith("/") and not is_dir):
            continue
        anchored = pattern.startswith("/") or "/" in core
        if fnmatch.fnmatch(path if anchored else name, core):
            return True
    return False


def upload_limit(env: Mapping[str, str]) -> tuple[int, str]:
    value = env.get("RAY_max_grpc_message_size", "")
    if value.isdigit():
        return int(value), "RAY_max_grpc_message_size"
    return RAY_UPLOAD_LIMIT, "Ray 2.60 GRPC_CPP_MAX_MESSAGE_SIZE (512 MiB)"


def _flag(argv: list[str], name: str) -> str | None:
    for i, arg in enumerate(argv):
        if arg == name and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith(name + "="):
            return arg.split("=", 1)[1]
    return None
