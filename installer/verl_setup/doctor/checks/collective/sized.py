"""The sized all-gather: the size of the run's real all-gather and its timeout, and the
verdict on how long an all-gather of that size took (so "slow but healthy" is told apart from
"broken link" before launch, as verl#5750's 600 s _ALLGATHER_BASE of 8.2e8 bf16 elements was not).

The size is `--bucket-numel N` (a failed run's NumelOut), else an estimate from the launch's model
folder: FSDP all-gathers one wrapped unit at a time, by default a decoder layer, so the parameters
(weights' bytes / bytes per parameter of config.json's torch_dtype) over num_hidden_layers.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from verl_setup.doctor.checks.launch.reader import MODEL as MODEL_KEY
from verl_setup.doctor.context import Context
from verl_setup.doctor.probes.launch_command import Resolver, hydra_value
from verl_setup.doctor.probes.model_files import read_model
from verl_setup.doctor.probes.verl_config import MISSING
from verl_setup.doctor.result import Evidence, Finding

TIMEOUT_KEY = "actor_rollout_ref.nccl_timeout"
VERL_DEFAULT_TIMEOUT = 600  # verl 0.9.1's ppo_trainer.yaml
BYTES = {"bfloat16": 2, "float16": 2, "float32": 4}
SLOW = 0.5  # of the timeout: a run whose buckets take half the timeout is one hiccup from failing


def bucket(ctx: Context, evidence: list[Evidence]) -> int | None:
    """Elements of the run's all-gather: the flag, else the estimate from the model folder."""
    if ctx.options.bucket_numel:
        evidence.append(
            Evidence(name="bucket", value=f"{ctx.options.bucket_numel} elements", source="--bucket-numel")
        )
        return ctx.options.bucket_numel
    given = ctx.launch.override(MODEL_KEY) if ctx.launch else None
    model = read_model(Path(str(hydra_value(given.value))).expanduser()) if given and given.value else None
    if model is None or not model.weight_bytes:
        return None
    dtype = str(model.config.get("torch_dtype", "bfloat16"))
    layers = int(model.config.get("num_hidden_layers") or 1)
    params = model.weight_bytes // BYTES.get(dtype, 2)
    numel = params // layers
    evidence.append(
        Evidence(
            name="bucket",
            value=f"{numel} elements (estimate: {params} parameters / {layers} layers)",
            source=f"{model.path}: {model.weight_source}, config.json torch_dtype={dtype}",
        )
    )
    return numel


def timeout_s(ctx: Context, evidence: list[Evidence]) -> float:
    """actor_rollout_ref.nccl_timeout: the launch's value, else the installed verl's default."""
    config, _ = ctx.verl_config
    value: Any = MISSING
    source = f"verl's documented default ({VERL_DEFAULT_TIMEOUT} s)"
    if ctx.launch is not None and config is not None:
        value, source = Resolver(ctx.launch, config, ctx.env).value(TIMEOUT_KEY)
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        seconds = float(VERL_DEFAULT_TIMEOUT)
    evidence.append(Evidence(name=TIMEOUT_KEY, value=f"{seconds:g} s", source=source))
    return seconds


def judge_sized(results: list[dict[str, Any]], numel: int, timeout: float) -> list[Finding]:
    """The sized all-gather's slowest rank against the timeout."""
    times = [float(r["sized_seconds"]) for r in results if r.get("sized_seconds") is not None]
    if not times:
        errors = sorted({str(r.get("sized_error")) for r in results if r.get("sized_error")})
        return [
            Finding(
                status="fail",
                message=f"the sized all-gather did not finish: {'; '.join(errors) or 'no answer'}",
            )
        ]
    slowest = max(times)
    share = slowest / timeout
    gb = numel * 2 / 1e9
    text = (
        f"an all-gather of {numel} elements ({gb:.2f} GB in bf16) took {slowest:.2f} s on the slowest "
        f"of {len(times)} rank(s): {share:.1%} of {TIMEOUT_KEY}={timeout:g} s"
    )
    if share >= 1:
        return [Finding(status="fail", message=text + ": the run's collectives time out",
                        remedy=f"raise {TIMEOUT_KEY} above {slowest * 2:.0f} s, or find the slow link "
                        "(NCCL_DEBUG=INFO: the transport each channel uses)")]  # fmt: skip
    if share >= SLOW:
        return [Finding(status="warn", message=text + ": slow but healthy, one hiccup from the timeout",
                        remedy=f"raise {TIMEOUT_KEY} to {slowest * 4:.0f} s or more")]  # fmt: skip
    return [Finding(status="pass", message=text)]
