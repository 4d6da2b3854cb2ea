"""`verl-setup smoke`'s one call: read the env, check its verl has smoke modules, run, tidy up."""

from __future__ import annotations

import contextlib
import shutil
import signal
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from verl_setup.errors import BadInputError
from verl_setup.smoke.launch import NoModuleLineError, module_line
from verl_setup.smoke.manifest import read_target
from verl_setup.smoke.run import Say, SmokeOptions, SmokeReport, smoke
from verl_setup.util.bounded import one_line


@dataclass(frozen=True, kw_only=True)
class SmokeRequest:
    """The command's options, typed."""

    prefix: Path
    work: Path | None = None  # None: a new temp folder
    model: Path | None = None
    gpus: int = 0
    ray_cpus: int = 16
    storage_units: int = 1
    timeout: float = 600.0
    keep: bool = False


class Terminated(KeyboardInterrupt):
    """SIGTERM during a run: unwinds like Ctrl-C, so the private Ray and main_ppo are stopped."""


@contextlib.contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    def handler(signum: int, _frame: object) -> None:
        raise Terminated(f"signal {signum}")

    try:
        previous = signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread: leave signals alone
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def run_smoke(req: SmokeRequest, env: Mapping[str, str], say: Say) -> SmokeReport:
    """Run the smoke test; the run folder is removed after a pass unless kept (kept after a failure)."""
    target = read_target(req.prefix)
    if req.model is not None and not (req.model / "config.json").is_file():
        raise BadInputError(
            f"--model {one_line(str(req.model))}: no config.json there (a Hugging Face model folder)"
        )
    if req.gpus == 0:
        try:
            module_line(target.verl)
        except NoModuleLineError as exc:
            raise BadInputError(f"{exc}; run the GPU path (--gpus N) on a GPU host") from exc
    elif target.engine is None:
        raise BadInputError(f"row {target.row} has no rollout engine (vllm or sglang) for the GPU path")
    if req.timeout <= 0:
        raise BadInputError("--timeout must be above 0")
    work = req.work or Path(tempfile.mkdtemp(prefix="verl-setup-smoke-"))
    opts = SmokeOptions(
        work=work,
        model=req.model,
        gpus=req.gpus,
        ray_cpus=req.ray_cpus,
        storage_units=req.storage_units,
        timeout=req.timeout,
    )
    with _sigterm_as_interrupt():
        report = smoke(target, opts, env, say)
    if report.ok and not req.keep:
        ray = work / "ray"
        if ray.is_symlink():  # the private Ray's short folder (run._ray_root)
            shutil.rmtree(ray.resolve(), ignore_errors=True)
        shutil.rmtree(work, ignore_errors=True)
    return report
