"""The training-memory planner for one launch, as `plan --launch` asks for it: doctor's `fit` check
alone (the same use case as `doctor --check fit`), on the plan's host (a saved `detect --json`, or
this machine's GPUs)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from verl_setup.doctor.checks.memory.fit import check_fit
from verl_setup.doctor.context import Options
from verl_setup.doctor.result import CheckResult
from verl_setup.doctor.run import make_context
from verl_setup.errors import BadInputError


def launch_of(words: Sequence[str]) -> tuple[str, ...]:
    """The launch command after `--` (the separator dropped); empty is bad input."""
    launch = tuple(words[1:] if words and words[0] == "--" else words)
    if not launch:
        raise BadInputError(
            "--launch needs the training command after `--` "
            "(verl-setup plan --launch -- python3 -m verl.trainer.main_ppo ...)"
        )
    return launch


def fit_of_launch(
    launch: Sequence[str],
    env: Mapping[str, str],
    *,
    host: Path | None,
    matrix: Path | None = None,
    config_prefix: Path | None = None,
) -> CheckResult:
    """Will `launch`'s training step fit each GPU of `host` (or of this machine)? An estimate."""
    options = Options(
        checks=("fit",),
        config_prefix=config_prefix,
        workdir=Path.cwd(),
        launch=tuple(launch),
        matrix=matrix,
    )
    return check_fit(make_context(options, env, host))
