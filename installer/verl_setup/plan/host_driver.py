"""The NVIDIA driver a host file or detection reports, as planning compares it: WSL's Windows
driver through NVIDIA's Windows table, and a Jetson refused (its GPU runs under L4T)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from verl_setup.errors import BadInputError, NoCompatibleRowError
from verl_setup.matrix.cuda import CudaRules
from verl_setup.util.versions import DriverVersion

if TYPE_CHECKING:  # a plan from flags alone never loads the host's fact classes
    from verl_setup.host.facts import HostFacts


def host_driver(host: HostFacts, host_source: str, rules: CudaRules) -> tuple[DriverVersion, str]:
    """The driver fact of a host file or detection (WSL: the Linux floor its Windows driver meets)."""
    assert host.nvidia is not None  # noqa: S101  # checked by the caller
    try:
        version = DriverVersion.parse(host.nvidia.version)
    except BadInputError as exc:
        raise BadInputError(f"{host_source}: {exc}") from exc
    source = f"{host_source} ({host.nvidia.source})"
    if host.host_kind.kind != "wsl":
        return version, source
    # WSL reports the Windows driver: rows state Linux floors, so compare through NVIDIA's
    # Windows table and say so.
    equivalent = rules.windows_equivalent(version)
    if equivalent is None:
        raise NoCompatibleRowError(
            f"{source}: WSL: Windows driver {version} is below NVIDIA's Windows floor of every CUDA "
            "family in cuda.yaml; update the Windows driver"
        )
    linux, major = equivalent
    return (
        linux,
        f"{source}; WSL: Windows driver {version} meets the Windows floor of CUDA {major}.x, "
        f"so it counts as the Linux floor {linux} (minor-version compatibility only)",
    )


def jetson_message(host: HostFacts, host_source: str) -> str:
    """Why a Jetson gets no row: its GPU runs under L4T, not a discrete-GPU driver."""
    release = f"L4T {host.host_kind.release}" if host.host_kind.release else "L4T"
    return (
        f"{host_source}: a Jetson ({release}; {host.host_kind.evidence}): its integrated GPU runs "
        "under L4T, not a discrete-GPU driver, so these matrix rows do not apply "
        "(plan for a discrete-GPU machine with --driver and --gpu)"
    )
