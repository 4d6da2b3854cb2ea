"""Run the selected checks in order and print the report; exit 5 when any check fails."""

from __future__ import annotations

import traceback
from collections.abc import Callable, Mapping
from pathlib import Path

from verl_setup.doctor.checks.accelerator import check_accelerator
from verl_setup.doctor.checks.collective import check_collective
from verl_setup.doctor.checks.cuda import check_cuda
from verl_setup.doctor.checks.engine_env import check_engine_env
from verl_setup.doctor.checks.gpu_memory import check_gpu_memory
from verl_setup.doctor.checks.hf_cache import check_hf_cache
from verl_setup.doctor.checks.launch import check_launch
from verl_setup.doctor.checks.memory import check_memory
from verl_setup.doctor.checks.memory.fit import check_fit
from verl_setup.doctor.checks.pins import check_pins
from verl_setup.doctor.checks.python import check_python
from verl_setup.doctor.checks.ray import check_ray
from verl_setup.doctor.context import Context, Options
from verl_setup.doctor.result import CheckResult
from verl_setup.errors import BadInputError
from verl_setup.host.facts import HostFacts
from verl_setup.matrix.load import load_matrix
from verl_setup.plan.target import from_env
from verl_setup.util.vocab import suggest

Check = Callable[[Context], CheckResult]

# In report order.
CHECKS: dict[str, Check] = {
    "python": check_python,
    "pins": check_pins,  # verify's pin check, no import probe (issue 32)
    "cuda": check_cuda,
    "ray": check_ray,
    "collective": check_collective,
    "hf-cache": check_hf_cache,
    "gpu-memory": check_gpu_memory,
    "memory": check_memory,
    "fit": check_fit,
    "engine-env": check_engine_env,
    "launch": check_launch,
    "accelerator": check_accelerator,  # Ascend NPU / AMD ROCm hosts (issue 35)
}


def selected(ids: tuple[str, ...]) -> list[str]:
    """The check ids asked for (all when none), validated with a suggestion."""
    for check_id in ids:
        if check_id not in CHECKS:
            hint = suggest(check_id, CHECKS)
            raise BadInputError(f"no doctor check {check_id!r}{hint}; checks: {', '.join(CHECKS)}")
    return [c for c in CHECKS if not ids or c in ids]


def run_checks(ctx: Context) -> list[CheckResult]:
    """Every selected check; a bug in one becomes that check's failure, not a lost report."""
    results = []
    for check_id in selected(ctx.options.checks):
        try:
            results.append(CHECKS[check_id](ctx))
        except BadInputError:
            raise
        except Exception as exc:
            if ctx.env.get("VERL_SETUP_DEBUG"):
                raise
            results.append(
                CheckResult(
                    id=check_id,
                    status="fail",
                    summary=f"the check itself failed: {type(exc).__name__}: {exc}",
                    remedy="rerun with VERL_SETUP_DEBUG=1 and report the traceback:\n"
                    + "".join(traceback.format_exception_only(type(exc), exc)).strip(),
                )
            )
    return results


def make_context(options: Options, env: Mapping[str, str], host: HostFacts | Path | None = None) -> Context:
    """A context over given facts, a host file, or (lazily) detection."""
    matrix = load_matrix(from_env(options.matrix, env, "VERL_SETUP_MATRIX"))
    return Context(options=options, env=dict(env), matrix=matrix, host=host)
