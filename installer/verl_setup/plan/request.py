"""What the user asked for a plan: flags, VERL_SETUP_* variables, a team config (plan/target.py
applies the precedence)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True, kw_only=True)
class Request:
    """What the user asked for on the command line (None = not given)."""

    driver: str | None = None
    gpus: tuple[str, ...] = ()
    sm: str | None = None
    gpu_count: int | None = None
    no_gpu: bool = False
    python: str | None = None
    arch: str | None = None
    glibc: str | None = None
    verl: str | None = None
    engine: str | None = None
    backend: str | None = None
    policy: str | None = None
    prefer: str | None = None
    host_file: Path | None = None
    npu: str | None = None  # Ascend chip family (910B); --cann and --rocm: the toolkit on the target
    cann: str | None = None
    rocm: str | None = None
    config: Mapping[str, str] = field(default_factory=dict)  # the config files' (below VERL_SETUP_*)
    config_source: str = ""  # the file; config_sources: each key's, where levels were merged
    config_sources: Mapping[str, str] = field(default_factory=dict)

    @property
    def accelerator_asked(self) -> tuple[str | None, str | None, str | None, tuple[str, ...]]:
        """--npu, --cann, --rocm and --gpu, as plan/accelerator.py reads them."""
        return self.npu, self.cann, self.rocm, self.gpus
