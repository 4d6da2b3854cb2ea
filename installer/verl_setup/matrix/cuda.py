"""CUDA rules from matrices/cuda.yaml: which driver runs which CUDA; GPU identity from gpus.yaml."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property

from verl_setup.matrix.gpus import load_gpu_table
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

    def windows_equivalent(self, windows_driver: DriverVersion) -> tuple[DriverVersion, str] | None:
        """For WSL: the Linux family floor of the newest CUDA family a Windows driver runs.

        Rows state Linux floors; a Windows driver that meets the Windows floor of CUDA 12.x
        (528.33) runs what a Linux 525.60.13 runs under minor-version compatibility, no more.
        """
        fitting = [
            major
            for major, floor in self.facts.windows_families.items()
            if DriverVersion.parse(floor.min_driver) <= windows_driver and major in self.facts.families
        ]
        if not fitting:
            return None
        major = max(fitting, key=lambda m: (len(m), m))  # "13" > "12" without int()
        return DriverVersion.parse(self.facts.families[major].min_driver), major

    def compute_capability(self, gpu_name: str, pci_device_id: str | None = None) -> str | None:
        """Compute capability of a GPU: by PCI device id, else by whole product name (gpus.yaml)."""
        found = load_gpu_table().identify(gpu_name, pci_device_id)
        return found.compute_capability if found else None

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
