"""The CUDA-OOM verdict's plan: the failed run's launch (from its log) through the training-memory
planner, on the GPU size torch printed, to say what would have fit instead of a smaller micro-batch
the run may already have."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from verl_setup.doctor.checks.memory.changes import rank
from verl_setup.doctor.checks.memory.fit import changes_text
from verl_setup.doctor.checks.memory.plan import GIB, gib
from verl_setup.doctor.checks.memory.plan import estimate as plan_estimate
from verl_setup.doctor.checks.memory.setup import setup_from
from verl_setup.doctor.checks.memory.shape import shape_of
from verl_setup.doctor.probes.model_files import HUB_ID, ModelFiles, hub_snapshot, read_model

_SIZE = re.compile(r"([\d.]+) ([KMG])iB")
_UNIT = {"K": 2**10, "M": 2**20, "G": 2**30}


def size_bytes(text: str) -> int | None:
    """'21.99 GiB' as bytes."""
    m = _SIZE.fullmatch(text.strip())
    return int(float(m[1]) * _UNIT[m[2]]) if m else None


def _model(path: str, env: Mapping[str, str]) -> ModelFiles | None:
    model = read_model(Path(path).expanduser())
    if model is not None:
        return model
    # A path from another machine: the same model in this host's Hugging Face cache, by its last two
    # components (/data/models/Qwen/Qwen2.5-1.5B-Instruct -> Qwen/Qwen2.5-1.5B-Instruct).
    parts = Path(path).parts
    hub_id = "/".join(parts[-2:]) if len(parts) >= 2 else ""
    snapshot = hub_snapshot(hub_id, env) if HUB_ID.match(hub_id) else None
    return read_model(snapshot) if snapshot is not None else None


def plan_lines(values: Mapping[str, Any], total: str | None, env: Mapping[str, str] | None = None) -> tuple[
    list[str], dict[str, str]
]:  # fmt: skip
    """Remedy lines and facts from the planner, or one line saying what it lacked."""
    env = os.environ if env is None else env
    path = values.get("actor_rollout_ref.model.path")
    model = _model(str(path), env) if path else None
    shape = shape_of(model.config) if model is not None else None
    gpu = size_bytes(total) if total else None
    if shape is None or gpu is None:
        lacks = "the GPU's size" if shape is not None else f"the model's config.json (model.path {path!r})"
        return [
            f"the training-memory planner could not run on this launch: it needs {lacks}; run `verl-setup "
            "doctor --check fit -- <the launch>` where the model folder is readable"
        ], {}
    setup = setup_from(values.get, shape, gpu_bytes=gpu)
    e = plan_estimate(setup)
    peak, dominant = e.peak, e.peak.dominant
    facts = {"planner_peak": f"{peak.name} {gib(peak.total)}", "planner_verdict": e.verdict}
    head = (
        f"the training-memory planner on this run's launch (estimate): the {peak.name} phase needs "
        f"{gib(peak.total)} of the {gib(e.limit)} a {gib(gpu)} GPU offers; the largest term is "
        f"{dominant.name} ({gib(dominant.bytes)} = {dominant.formula})"
    )
    if e.fits:
        return [head + "; by this estimate it fits, so the OOM is outside the modelled terms"], facts
    return [head, changes_text(rank(setup))], facts


__all__ = ["GIB", "plan_lines", "size_bytes"]
