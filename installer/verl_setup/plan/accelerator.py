"""The target's Ascend NPU or AMD GPU, from flags (--npu/--cann, --gpu MI300X --rocm) or a host's
detected accelerators, and how a row's accelerator requirements meet it (fit.py asks).

An accelerator target is never asked for a compute capability: that is NVIDIA's number.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from verl_setup.errors import BadInputError
from verl_setup.util.versions import minor_of, shown

if TYPE_CHECKING:
    from verl_setup.host.facts import HostFacts
    from verl_setup.matrix.schema import Row

FAMILY_WORDS = {"ascend": "Ascend NPU", "rocm": "AMD GPU (ROCm)"}
TOOLKIT = {"ascend": "CANN", "rocm": "ROCm"}
# Ascend chip families verl and vllm-ascend name (910B: Atlas A2, 910C: Atlas A3, 310P: inference).
_NPU = re.compile(r"^(?:HUAWEI\s+)?(?:ASCEND\s*)?(910B|910C|910|310P|310B|310)([0-9A-Z-]*)$", re.I)
# AMD Instinct names -> gfx target (ROCm's GPU support table; MI300A/MI300X/MI325X are all gfx942,
# ROCm/aiter#4923; MI350X/MI355X gfx950, ROCm/rocm-systems#2987; MI250X gfx90a, rocm_smi_lib#159).
AMD_GFX = {
    "MI100": "gfx908",
    "MI210": "gfx90a",
    "MI250": "gfx90a",
    "MI250X": "gfx90a",
    "MI300A": "gfx942",
    "MI300X": "gfx942",
    "MI325X": "gfx942",
    "MI350X": "gfx950",
    "MI355X": "gfx950",
}
_AMD = re.compile(r"^(?:AMD\s+)?(?:INSTINCT\s+)?(MI\d{3}[AX]?)\b(?:\s+VF)?$", re.I)
# Why a family has no row (said when there is none). ROCm: verl on ROCm ships as images (ROCm's
# verl install guide: rocm/verl:verl-0.6.0.amd0_rocm7.0_vllm0.11.0.dev, MI300X, ROCm 7.0, torch
# 2.9.0), and torch's ROCm builds come from an index this tool's default index does not mirror.
NO_ROW_WHY = {
    "rocm": (
        ": verl runs on ROCm from images (ROCm's verl guide: "
        "rocm/verl:verl-0.6.0.amd0_rocm7.0_vllm0.11.0.dev for MI300X with ROCm 7.0), torch's ROCm "
        "builds are not on the default package index, and no ROCm stack has been resolved or "
        "proven here, so no row offers one; the rows are for NVIDIA GPUs, Ascend NPUs and the CPU"
    ),
}
_GFX = re.compile(r"^gfx[0-9a-f]{3,5}$")
_TOOLKIT_VERSION = re.compile(r"^[0-9]{1,2}\.[0-9]{1,2}(?:\.[0-9A-Za-z]{1,12}){0,3}$")


@dataclass(frozen=True, kw_only=True)
class AcceleratorTarget:
    """What selection needs to know about an Ascend or AMD target."""

    family: str  # "ascend" | "rocm"
    name: str  # as given or detected ("Ascend 910B3", "AMD Instinct MI300X VF")
    chip: str | None  # Ascend chip family (910B) or AMD gfx target (gfx942)
    toolkit: str | None  # CANN or ROCm version

    def words(self) -> str:
        """ "Ascend NPU 910B (CANN 8.5.1)"."""
        chip = f" {self.chip}" if self.chip else ""
        kit = (
            f"{TOOLKIT[self.family]} {self.toolkit}" if self.toolkit else f"{TOOLKIT[self.family]} not given"
        )
        return f"{FAMILY_WORDS[self.family]}{chip} ({self.name}; {kit})"


def family_of_name(name: str) -> str | None:
    """ "ascend", "rocm" or None (an NVIDIA name, or unknown) for a --gpu NAME."""
    text = name.strip()
    if _NPU.match(text):
        return "ascend"
    if _AMD.match(text) or _GFX.match(text.lower()) or text.upper().startswith(("AMD ", "RADEON")):
        return "rocm"
    return None


def npu_family(chip: str) -> str | None:
    """910B3 -> 910B; "Ascend 910B" -> 910B; 910 -> 910 (first generation, or an A3 named plainly)."""
    m = _NPU.match(chip.strip())
    return m.group(1).upper() if m else None


def amd_gfx(name: str) -> str | None:
    """MI300X -> gfx942; a gfx target stays itself."""
    if _GFX.match(name.strip().lower()):
        return name.strip().lower()
    m = _AMD.match(name.strip())
    return AMD_GFX.get(m.group(1).upper()) if m else None


def _toolkit(text: str | None, what: str) -> str | None:
    if text is None:
        return None
    text = text.strip()
    if not _TOOLKIT_VERSION.fullmatch(text):
        raise BadInputError(
            f"bad {what} version {shown(text)}: expected a form like 8.5.1 or 8.1.RC1 (6.4 for ROCm)"
        )
    return text


def from_flags(
    *, npu: str | None, cann: str | None, rocm: str | None, gpus: tuple[str, ...], env: Mapping[str, str]
) -> tuple[AcceleratorTarget, str] | None:
    """The accelerator the flags (or VERL_SETUP_NPU/_CANN/_ROCM) describe, with its source; None if none."""
    npu = npu or env.get("VERL_SETUP_NPU") or None
    cann = cann or env.get("VERL_SETUP_CANN") or None
    rocm = rocm or env.get("VERL_SETUP_ROCM") or None
    named = [(g, family_of_name(g)) for g in gpus]
    ascend_names = [g for g, f in named if f == "ascend"]
    amd_names = [g for g, f in named if f == "rocm"]
    if (npu or cann or ascend_names) and (rocm or amd_names):
        raise BadInputError("an Ascend NPU and an AMD GPU were both given: plan for one machine at a time")
    if npu or cann or ascend_names:
        name = npu or (ascend_names[0] if ascend_names else "Ascend NPU")
        chip = npu_family(name) if (npu or ascend_names) else None
        if (npu or ascend_names) and chip is None:
            raise BadInputError(f"unknown Ascend NPU {shown(name)}: expected 910B, 910C, 910B3, 310P, ...")
        return AcceleratorTarget(
            family="ascend", name=name, chip=chip, toolkit=_toolkit(cann, "CANN")
        ), "flags"
    if rocm or amd_names:
        name = amd_names[0] if amd_names else "AMD GPU"
        chip = amd_gfx(name) if amd_names else None
        return AcceleratorTarget(family="rocm", name=name, chip=chip, toolkit=_toolkit(rocm, "ROCm")), "flags"
    return None


def target_fact(
    asked: tuple[str | None, str | None, str | None, tuple[str, ...]],
    env: Mapping[str, str],
    host: HostFacts | None,
    host_source: str,
) -> tuple[AcceleratorTarget | None, str]:
    """(value, source): flags (--npu/--cann, --gpu MI300X/--rocm, or VERL_SETUP_*) > host file > detection.
    `asked`: the request's npu, cann, rocm and gpus."""
    npu, cann, rocm, gpus = asked
    given = from_flags(npu=npu, cann=cann, rocm=rocm, gpus=gpus, env=env)
    if given is not None:
        return given[0], "flags --npu/--cann/--gpu/--rocm (or VERL_SETUP_NPU/_CANN/_ROCM)"
    found = from_host(host) if host is not None else None
    return (found, f"{host_source} (accelerators)") if found is not None else (None, "none")


def nvidia_names(gpus: tuple[str, ...]) -> tuple[str, ...]:
    """The --gpu names that are not Ascend or AMD parts."""
    return tuple(g for g in gpus if family_of_name(g) is None)


def from_host(host: HostFacts) -> AcceleratorTarget | None:
    """The host's accelerator when it has no NVIDIA GPU (an NVIDIA host plans as before)."""
    if host.gpus or not host.accelerators:
        return None
    a = host.accelerators[0]
    first = a.devices[0] if a.devices else None
    name = first.name if first else FAMILY_WORDS[a.family]
    if a.family == "ascend":
        chip = npu_family(first.chip or "") if first and first.chip else None
    else:
        chip = first.chip if first else None
    return AcceleratorTarget(family=a.family, name=name, chip=chip, toolkit=a.toolkit_version)


def reasons(row: Row, target: AcceleratorTarget | None, engine: str | None) -> list[str] | None:
    """What an accelerator row or target fails; None when neither is about an accelerator."""
    want = row.requires.accelerator
    if want is None and target is None:
        return None
    if target is None:
        return [
            f"needs {FAMILY_WORDS[want or 'ascend']}s ({', '.join(row.requires.chips)}) with "
            f"{TOOLKIT[want or 'ascend']} {row.requires.toolkit or '?'}; none found "
            "(plan for another machine with --npu CHIP --cann VERSION)"
        ]
    if want is None:
        if not row.requires.gpu and engine == "none":
            return []  # the CPU development row, asked for by name
        kind = "an NVIDIA" if row.requires.gpu else "a CPU-only"
        return [f"{kind} row, and this machine's accelerator is {target.words()}"]
    if want != target.family:
        return [f"a {FAMILY_WORDS[want]} row, and this machine's accelerator is {target.words()}"]
    out = []
    if row.requires.chips and target.chip not in row.requires.chips:
        got = target.chip or "not known"
        out.append(
            f"{FAMILY_WORDS[want]} {' or '.join(row.requires.chips)} needed, this one is {got} "
            f"({target.name}; say the chip family with --npu)"
        )
    need = row.requires.toolkit
    if need and target.toolkit and minor_of(target.toolkit) != minor_of(need):
        out.append(f"{TOOLKIT[want]} {minor_of(need)}.x needed ({need} tested), host has {target.toolkit}")
    return out


def no_row_words(target: AcceleratorTarget, rows: tuple[Row, ...]) -> str:
    """The head of the no-row message: which family was found, and what this matrix's rows for it need."""
    mine = [r for r in rows if r.requires.accelerator == target.family]
    head = f"this machine has an {target.words()}. "
    if not mine:
        why = NO_ROW_WHY.get(target.family, "")
        return head + f"The matrix has no {FAMILY_WORDS[target.family]} row at all{why}. "
    needs = "; ".join(
        f"{r.id} needs {' or '.join(r.requires.chips) or 'any chip'} with "
        f"{TOOLKIT[target.family]} {r.requires.toolkit or 'any'} on {'/'.join(r.requires.arch)}"
        for r in mine
    )
    return head + f"Its {FAMILY_WORDS[target.family]} rows: {needs}. "
