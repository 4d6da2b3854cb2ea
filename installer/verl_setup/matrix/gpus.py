"""GPU identity from matrices/gpus.yaml: PCI device id -> chip -> compute capability, and the
product-name patterns used only when a GPU comes without an id."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property, lru_cache
from pathlib import Path

from verl_setup.errors import BadInputError
from verl_setup.matrix.cache import cached
from verl_setup.util.databuild import Builder
from verl_setup.util.paths import data_dir
from verl_setup.util.versions import parse_minor


@dataclass(frozen=True, kw_only=True)
class Chip:
    """A GPU die and the compute capability of every product built on it."""

    compute_capability: str
    example: str


@dataclass(frozen=True, kw_only=True)
class NamePattern:
    """A whole-name pattern (after a leading "NVIDIA ") and its compute capability."""

    pattern: str
    compute_capability: str


@dataclass(frozen=True, kw_only=True)
class GpusFile:
    """matrices/gpus.yaml."""

    schema: int
    sources: dict[str, str]
    chips: dict[str, Chip]
    devices: dict[str, str]
    names: tuple[NamePattern, ...]


@dataclass(frozen=True, kw_only=True)
class Identity:
    """A GPU's compute capability and how we know it."""

    compute_capability: str
    via: str  # "pci 0x2330 (GH100)" or "name pattern 'H100...'"


_NVIDIA_PREFIX = re.compile(r"^\s*NVIDIA\s+", re.IGNORECASE)
MAX_NAME = 200  # characters of a product name we match (nvidia-smi's are under 100)


@dataclass(frozen=True)
class GpuTable:
    """Identify a GPU by its PCI device id, else by its whole product name."""

    facts: GpusFile

    @cached_property
    def _names(self) -> list[tuple[re.Pattern[str], NamePattern]]:
        return [(re.compile(n.pattern, re.IGNORECASE | re.ASCII), n) for n in self.facts.names]

    def by_device(self, pci_device_id: str | None) -> Identity | None:
        """The chip and compute capability of a PCI device id ('2330' -> GH100, 9.0)."""
        chip_name = self.facts.devices.get((pci_device_id or "").lower())
        chip = self.facts.chips.get(chip_name or "")
        if chip_name is None or chip is None:
            return None
        return Identity(
            compute_capability=chip.compute_capability, via=f"pci 0x{pci_device_id} ({chip_name})"
        )

    def matching(self, name: str) -> list[NamePattern]:
        """Every name pattern that matches the whole name (the table is right when it is 0 or 1)."""
        if len(name) > MAX_NAME:
            return []
        plain = " ".join(_NVIDIA_PREFIX.sub("", name).split())
        return [entry for pattern, entry in self._names if pattern.fullmatch(plain)]

    def by_name(self, name: str) -> Identity | None:
        """The compute capability of a product name, or None when no pattern (or two) match."""
        found = self.matching(name)
        if len(found) != 1:
            return None
        return Identity(
            compute_capability=found[0].compute_capability, via=f"name pattern {found[0].pattern!r}"
        )

    def identify(self, name: str, pci_device_id: str | None = None) -> Identity | None:
        """PCI device id first (it names the chip), then the product name."""
        return self.by_device(pci_device_id) or self.by_name(name)


def gpus_path() -> Path:
    """matrices/gpus.yaml of this installation."""
    return data_dir("matrices") / "gpus.yaml"


@lru_cache(maxsize=2)
def load_gpu_table(path: Path | None = None) -> GpuTable:
    """Load and check the GPU table; BadInputError names the first problem."""
    path = path or gpus_path()
    return cached("gpus", (path,), GpuTable, lambda: _parse(path))


def _parse(path: Path) -> GpuTable:
    from verl_setup.util.yamlread import YamlError, read_yaml  # noqa: PLC0415  # a cached table needs no YAML

    try:
        data, _ = read_yaml(path)
    except YamlError as exc:
        raise BadInputError(str(exc)) from exc
    builder = Builder(str(path))
    facts = builder.build(GpusFile, data, "", 1)
    problems = builder.problems if facts is None else _check(facts, str(path))
    if facts is None or problems:
        raise BadInputError(problems[0])
    return GpuTable(facts)


def _check(facts: GpusFile, file: str) -> list[str]:
    problems = []
    for name, chip in facts.chips.items():
        try:
            parse_minor(chip.compute_capability, "compute capability")
        except BadInputError as exc:
            problems.append(f"{file}: chips.{name}: {exc}")
    for device, chip_name in facts.devices.items():
        if not re.fullmatch(r"[0-9a-f]{4}", device):
            problems.append(f"{file}: devices.{device}: expected four lower-case hex digits")
        if chip_name not in facts.chips:
            problems.append(f"{file}: devices.{device}: unknown chip {chip_name!r}")
    for entry in facts.names:
        try:
            re.compile(entry.pattern)
        except re.error as exc:
            problems.append(f"{file}: names: bad pattern {entry.pattern!r}: {exc}")
    return problems
