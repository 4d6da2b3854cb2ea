"""What a model folder says about the model: its config.json and the size of its weights.

Read from files only (config.json, model.safetensors.index.json, the weight files' sizes);
nothing is loaded and nothing is downloaded.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from verl_setup.doctor.probes.hf_paths import hub_cache

HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
WEIGHTS = ("*.safetensors", "*.bin", "*.pt")


@dataclass(frozen=True, kw_only=True)
class ModelFiles:
    """A local model folder's config and weight size (None when it cannot be told)."""

    path: Path
    config: dict[str, Any] = field(default_factory=dict)
    weight_bytes: int | None = None
    weight_source: str = ""


def read_model(path: Path) -> ModelFiles | None:
    """The folder's config.json and weight size; None if it is no model folder."""
    try:
        config = json.loads((path / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(config, dict):
        return None
    size, source = _weights(path)
    return ModelFiles(path=path, config=config, weight_bytes=size, weight_source=source)


def hub_snapshot(model_id: str, env: Mapping[str, str]) -> Path | None:
    """The cached snapshot of a Hub id that huggingface_hub would load: the one refs/main names,
    else the newest (a download pinned to another revision), in the cache `env` points at."""
    repo = Path(hub_cache(env)) / ("models--" + model_id.replace("/", "--"))
    snapshots = repo / "snapshots"
    try:
        main = (repo / "refs/main").read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        main = ""
    if main and "/" not in main and (snapshots / main / "config.json").is_file():
        return snapshots / main
    found = (
        sorted(snapshots.glob("*/config.json"), key=lambda p: p.stat().st_mtime) if snapshots.is_dir() else []
    )
    return found[-1].parent if found else None


def _weights(path: Path) -> tuple[int | None, str]:
    index = path / "model.safetensors.index.json"
    try:
        total = json.loads(index.read_text(encoding="utf-8"))["metadata"]["total_size"]
        return int(total), f"{index.name} metadata.total_size"
    except (OSError, ValueError, KeyError, TypeError):
        pass
    for pattern in WEIGHTS:
        files = list(path.glob(pattern))
        if files:
            return sum(f.stat().st_size for f in files), f"sum of {len(files)} {pattern} file(s)"
    return None, ""
