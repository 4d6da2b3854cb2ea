"""CUDA rules from matrices/cuda.yaml: which driver runs which CUDA, and GPU names to SM."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property

from verl_setup.matrix.schema import Architecture, CudaFile
from verl_setup.util.versions import DriverVersion, parse_minor


@dataclass(frozen=True)
class CudaRules:
    """Driver and architecture rules, derived once from the CUDA facts file."""

    facts: CudaFile

    def family_floor(self, cuda: str) -> DriverVersion | None:
        """Minor-version-compatibility floor of a CUDA version's major family."""
        major = cuda.split(".", maxsplit=1)[0]
        floor = self.facts.families.get(major)
        return DriverVersion.parse(floor.min_driver) if floor else None

    def full_support(self, cuda: str) -> DriverVersion | None:
        """The GA driver bundled with that toolkit (NVIDIA Table 3)."""
        entry = self.facts.toolkits.get(cuda)
        return DriverVersion.parse(entry.min_driver) if entry else None

    def newest_cuda(self, driver: DriverVersion) -> str | None:
        """The newest toolkit this driver fully supports."""
        fitting = [c for c, t in self.facts.toolkits.items() if DriverVersion.parse(t.min_driver) <= driver]
        return max(fitting, key=lambda c: parse_minor(c, "CUDA version"), default=None)

    @cached_property
    def _patterns(self) -> list[tuple[re.Pattern[str], str]]:
        return [
            (re.compile(rf"(?<![\w-]){g.pattern}(?![\w])", re.IGNORECASE), g.compute_capability)
            for g in self.facts.gpus
        ]

    def compute_capability(self, gpu_name: str) -> str | None:
        """Compute capability of a GPU product name ('NVIDIA H100 80GB HBM3' -> '9.0')."""
        for pattern, cc in self._patterns:
            if pattern.search(gpu_name):
                return cc
        return None

    def matching_patterns(self, gpu_name: str) -> list[str]:
        """Every pattern that matches a name (used to check the table is unambiguous)."""
        return [
            g.pattern for (p, _), g in zip(self._patterns, self.facts.gpus, strict=True) if p.search(gpu_name)
        ]

    @cached_property
    def _data_center(self) -> list[re.Pattern[str]]:
        facts = self.facts.forward_compat
        return [re.compile(rf"(?<![\w-]){g}(?![\w])", re.IGNORECASE) for g in (facts.gpus if facts else ())]

    def is_data_center(self, gpu_name: str) -> bool:
        """Whether a GPU name is a data-center product (forward compatibility's GPU list)."""
        return any(p.search(gpu_name) for p in self._data_center)

    def architecture(self, cc: str) -> Architecture | None:
        """Architecture name and first supporting CUDA for a compute capability."""
        return self.facts.architectures.get(cc)
