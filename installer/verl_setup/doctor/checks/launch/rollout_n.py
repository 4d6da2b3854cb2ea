"""What rollout.n does in the installed verl, with the line of verl's code that does it."""

from __future__ import annotations

import re
from pathlib import Path

from packaging.version import InvalidVersion, Version

from verl_setup.doctor.checks.launch.reader import ROLLOUT, ints
from verl_setup.doctor.probes.launch_command import Resolver
from verl_setup.doctor.probes.verl_config import VerlConfig
from verl_setup.doctor.result import Evidence, Finding


def explain_rollout_n(r: Resolver, config: VerlConfig, evidence: list[Evidence]) -> list[Finding]:
    """What rollout.n does in this verl version, with the line of verl's code that does it."""
    n, _ = r.value(f"{ROLLOUT}.n")
    if not ints(n):
        return []
    if n < 1:
        return [Finding(status="fail", message=f"rollout.n={n}: needs at least 1 sample per prompt")]
    train, _ = r.value("data.train_batch_size")
    per_step = f"; {train} prompts x {n} = {train * n} trajectories per step" if ints(train) else ""
    package = config.config_dir.parent.parent
    try:
        era2 = Version(config.version) >= Version("0.5.0")
    except InvalidVersion:
        return []
    if era2:
        where = _find(package / "trainer/ppo/ray_trainer.py", r"gen_batch\w*\s*=\s*gen_batch\.repeat\(")
        text = (
            f"rollout.n={n}: verl {config.version} repeats each prompt n times in the trainer before "
            "generation, and each copy is its own engine request with n=1 (batched by the engine's "
            "scheduler, prompt prefill shared only through prefix caching within one replica)"
        )
    else:
        where = _find(
            package / "workers/rollout/vllm_rollout/vllm_rollout_spmd.py", r"hasattr\(SamplingParams\(\)"
        )
        text = (
            f"rollout.n={n}: verl {config.version} copies n into vLLM's SamplingParams, so one "
            "generate() call returns n samples per prompt, batched inside the engine; the trainer "
            "repeats the batch n times after generation"
        )
    if where:
        evidence.append(Evidence(name="rollout.n mechanism", value=where, source="the installed verl's code"))
    findings = [Finding(status="pass", message=text + per_step)]
    caching, _ = r.value(f"{ROLLOUT}.enable_prefix_caching")
    if era2 and n > 1 and caching is False:
        findings.append(
            Finding(
                status="warn",
                message=f"rollout.n={n} with enable_prefix_caching=False: each of the n requests "
                "recomputes the prompt's prefill",
                remedy=f"keep {ROLLOUT}.enable_prefix_caching=True (the default) when n > 1",
            )
        )
    return findings


def _find(file: Path, pattern: str) -> str | None:
    """`path:line: text` of the first line matching pattern (evidence from verl's code)."""
    try:
        lines = file.read_text(encoding="utf-8").splitlines()
    except OSError:
        return None
    for number, line in enumerate(lines, 1):
        if re.search(pattern, line):
            return f"{file}:{number}: {line.strip()}"
    return None
