"""What main_ppo's output says: the metrics of each step, and how far the run got (its stage).

verl's console logger prints `step:N - key:value - ...` (verl/utils/logger/aggregate_logger.py,
concat_dict_to_str), from the TaskRunner actor through Ray's log forwarding; the smoke modules print
`verl-setup-smoke: ...` lines when the rollout starts and is ready.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from verl_setup.util.vocab import SMOKE_STAGES, SmokeStage

_STEP = re.compile(r"\bstep:(\d+) - (.*)$")
_NUMBER = re.compile(r"^(?:np\.\w+\()?\s*([-+]?(?:nan|inf|[0-9.]+(?:e[-+]?[0-9]+)?))\s*\)?$", re.IGNORECASE)
MARK = "verl-setup-smoke:"


def parse_value(text: str) -> float | None:
    """A logged number (`0.5`, `-1e-05`, `nan`, `np.float64(0.5)`), or None for anything else."""
    m = _NUMBER.match(text.strip())
    return float(m[1]) if m else None


def parse_step(line: str) -> tuple[int, dict[str, float]] | None:
    """(step, metrics) of one console-logger line, or None when the line is not one."""
    m = _STEP.search(line.rstrip())
    if m is None:
        return None
    metrics: dict[str, float] = {}
    for item in m[2].split(" - "):
        key, sep, value = item.partition(":")
        number = parse_value(value) if sep else None
        if number is not None:
            metrics[key.strip()] = number
    return int(m[1]), metrics


@dataclass(kw_only=True)
class StepMetrics:
    """What the output showed so far: the stage reached and each step's metrics."""

    steps: int
    stage: SmokeStage = "workers"
    metrics: dict[int, dict[str, float]] = field(default_factory=dict)
    seen: dict[str, bool] = field(default_factory=dict)

    def feed(self, line: str) -> SmokeStage | None:
        """Read one output line; the new stage when this line starts one, else None."""
        before = self.stage
        if MARK in line:
            if "rollout start" in line:
                self._reach("rollout start")
            elif "rollout server ready" in line:
                self._reach("first step")
            elif "weights synced" in line:
                self.seen["weight sync"] = True
        step = parse_step(line)
        if step is not None:
            self.metrics[step[0]] = step[1]
            self._reach("checkpoint" if step[0] >= self.steps else "update")
        return self.stage if self.stage != before else None

    def _reach(self, stage: SmokeStage) -> None:
        if SMOKE_STAGES.index(stage) > SMOKE_STAGES.index(self.stage):
            self.stage = stage


def feed_all(progress: StepMetrics, lines: Iterable[str]) -> StepMetrics:
    """Feed every line (tests, and a log read after the run)."""
    for line in lines:
        progress.feed(line)
    return progress


def finite(value: float | None) -> bool:
    return value is not None and math.isfinite(value)
