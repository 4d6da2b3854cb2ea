"""The smoke run's rule-based reward (verl's custom_reward_function): 1 for the right `#### N`, else
the share of the answer's digits the response contains, plus a shaping term below 0.01 that tells
two different responses apart. A random model's first answers often hold no digit at all: without
that term every reward of a group is 0, GRPO's advantages are 0 and the step's gradient is 0."""

from __future__ import annotations

import re
from typing import Any


def compute_score(
    data_source: str, solution_str: str | None, ground_truth: object, extra_info: Any = None, **kwargs: Any
) -> float:
    text = solution_str or ""
    found = re.findall(r"####\s*(-?\d+)", text)
    if found and found[-1] == str(ground_truth):
        return 1.0
    digits = str(ground_truth)
    share = 0.5 * sum(d in text for d in digits) / max(1, len(digits))
    return share + min(len(set(text)), 49) / 5000


if __name__ == "__main__":  # a quick look: python tiny_reward.py
    for answer in ("#### 12", "the sum is 12", "abc", "abcd", ""):
        print(repr(answer), compute_score("smoke", answer, 12))
