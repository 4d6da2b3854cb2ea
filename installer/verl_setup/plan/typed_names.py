"""Names as people type them: `--gpu "RTX 4090"` or `4090` for "GeForce RTX 4090", and `--driver
580` for a driver branch (planned against the lowest release of it that cuda.yaml names, saying so).
"""

from __future__ import annotations

import re
from collections.abc import Callable

from verl_setup.errors import BadInputError
from verl_setup.matrix.cuda import CudaRules
from verl_setup.util.versions import DriverVersion

BRANCH = re.compile(r"^\s*[Rr]?(\d{3})\s*$")  # 580, R580
BRANCH_WORDS = "driver branch"


def gpu_spellings(name: str) -> list[str]:
    """The name, then the GeForce spellings NVIDIA's tables use for it ("RTX 4090", "4090")."""
    plain = " ".join(name.split())
    out = [plain]
    if re.fullmatch(r"\d{4}( ?Ti| ?SUPER)*", plain, re.IGNORECASE):
        out.append(f"GeForce RTX {plain}")
    if re.match(r"(RTX|GTX) ", plain, re.IGNORECASE):
        out.append(f"GeForce {plain}")
    return out


def gpu_capability(name: str, lookup: Callable[[str], str | None]) -> tuple[str, str] | None:
    """(compute capability, the spelling that matched) for a typed GPU name, or None."""
    for spelling in gpu_spellings(name):
        cc = lookup(spelling)
        if cc is not None:
            return cc, spelling
    return None


def driver_branch(text: str, rules: CudaRules) -> tuple[DriverVersion, str] | None:
    """A bare branch (580) as its lowest release known here: the GA driver of the first CUDA
    toolkit (or family floor) on that branch in cuda.yaml. None: not a bare branch."""
    m = BRANCH.match(text)
    if m is None:
        return None
    major = int(m[1])
    known = [
        DriverVersion.parse(entry.min_driver)
        for entry in (*rules.facts.toolkits.values(), *rules.facts.families.values())
        if DriverVersion.parse(entry.min_driver).major == major
    ]
    if not known:
        raise BadInputError(
            f"{BRANCH_WORDS} {major}: no release of it in cuda.yaml; give the full version "
            "(nvidia-smi's, such as 580.95.05)"
        )
    lowest = min(known)
    return lowest, (
        f"{BRANCH_WORDS} {major}: planned against its lowest release {lowest}, the first on that "
        "branch in cuda.yaml"
    )


def typed_driver(text: str, source: str, rules: CudaRules) -> tuple[DriverVersion, str]:
    """A --driver value (a full version, or a branch) and its fact's source (a branch says so)."""
    branch = driver_branch(text, rules)
    if branch is None:
        return DriverVersion.parse(text), source
    return branch[0], f"{source}; {branch[1]}"


def branch_note(source: str) -> str | None:
    """The warning for a driver given as a branch (its fact's source says so), else None."""
    _, sep, note = source.partition("; ")
    if not sep or not note.startswith(BRANCH_WORDS):
        return None
    return f"{note}: give the full version (nvidia-smi) if yours is older"


# GPUs that come on one CPU architecture only: the Grace superchips (GH200, GB200, GB300) pair the
# GPU with NVIDIA's Arm Grace CPU (NVIDIA Grace Hopper / Grace Blackwell datasheets): aarch64.
_GRACE = re.compile(r"^(NVIDIA\s+)?G[HB]\d{3}\b", re.IGNORECASE)


def arch_from_gpus(value: str | None, source: str, gpu_names: tuple[str, ...]) -> tuple[str | None, str]:
    """The arch fact, inferred from the GPUs when none was given and they come in one arch only."""
    if value is not None or not gpu_names or not all(_GRACE.match(n) for n in gpu_names):
        return value, source
    return "aarch64", f"inferred from the GPU ({gpu_names[0]} has a Grace CPU: aarch64 only)"
