"""The neighbouring tools' own spellings of "this machine's driver": uv's UV_CUDA_DRIVER_VERSION
and conda's CONDA_OVERRIDE_CUDA. A user who set one for uv or conda means the same machine here,
so each overrides detection (below --driver and VERL_SETUP_DRIVER), and its fact says so."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from verl_setup.errors import BadInputError
from verl_setup.matrix.cuda import CudaRules
from verl_setup.util.versions import DriverVersion, parse_minor, shown

UV_DRIVER = "UV_CUDA_DRIVER_VERSION"
CONDA_CUDA = "CONDA_OVERRIDE_CUDA"


def anchor_driver(
    env: Mapping[str, str], rules: CudaRules
) -> tuple[DriverVersion, str] | tuple[Literal["none"], str] | None:
    """The driver the anchors' variables state, with its source; ("none", source) for conda's
    empty override (its spelling of "no CUDA here"); None when neither is set."""
    uv_text = env.get(UV_DRIVER, "").strip()
    if uv_text:
        try:
            driver = DriverVersion.parse(uv_text)
        except BadInputError as exc:
            raise BadInputError(f"env {UV_DRIVER}: {exc}") from exc
        return driver, f"env {UV_DRIVER} (uv's override of the detected driver)"
    if CONDA_CUDA not in env:
        return None
    text = env[CONDA_CUDA].strip()
    if not text:
        return "none", f"env {CONDA_CUDA}='' (conda's override: no CUDA on this machine)"
    return _conda_driver(text, rules)


def _conda_driver(text: str, rules: CudaRules) -> tuple[DriverVersion, str]:
    """CONDA_OVERRIDE_CUDA is conda's `__cuda`, the newest CUDA the driver runs: the driver is at
    least that toolkit's GA driver (NVIDIA's Table 3), the newest toolkit at or below it in cuda.yaml."""
    try:
        wanted = parse_minor(text if "." in text else f"{text}.0", "CUDA version")
    except BadInputError:
        raise BadInputError(f"env {CONDA_CUDA}={shown(text)}: expected a CUDA version such as 12.4") from None
    known = [(parse_minor(cuda, "CUDA version"), cuda) for cuda in rules.facts.toolkits]
    fitting = [(version, cuda) for version, cuda in known if version <= wanted and version[0] == wanted[0]]
    if not fitting:
        raise BadInputError(
            f"env {CONDA_CUDA}={shown(text)}: no CUDA {wanted[0]}.x toolkit at or below it in cuda.yaml"
        )
    cuda = max(fitting)[1]
    floor = rules.full_support(cuda)
    assert floor is not None  # noqa: S101  # cuda comes from the same table
    return floor, (
        f"env {CONDA_CUDA}={text} (conda's override of __cuda: a driver that runs CUDA {cuda}, "
        f"so at least its GA driver {floor})"
    )
