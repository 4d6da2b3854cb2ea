"""The smoke run's rule-based reward (verl's custom_reward_function): 1 for the right `#### N`, else
the share of the answer's digits the response contains, so that the rewards within a group differ."""

from __future__ import annotations

import re
from typing import Any


def compute_score(
    data_source: str, solution_str: str | None, ground_truth: object, extra_info: Any = None, **kwargs: Any
) -> float:
    found = re.findall(r"####\s*(-?\d+)", solution_str or "")
    if found and found[-1] == str(ground_truth):
        return 1.0
    digits = str(ground_truth)
    return 0.5 * sum(d in (solution_str or "") for d in digits) / max(1, len(digits))
