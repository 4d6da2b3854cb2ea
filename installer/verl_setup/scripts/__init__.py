"""Every program that runs in another interpreter, as a real file, named by path in one table.

Each is run by path (`python FILE ARGS`), or its text is shipped where no path can reach (a
container, a rendered file). They run in interpreters that may lack this package (a user's venv,
possibly Python 3.10): standard library at the top level, optional imports guarded where used.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

HERE = Path(__file__).resolve().parent

Script = Literal[
    "import_probe",
    "hydra_compose",
    "interpreter",
    "ray_every_node",
    "ray_task_detect",
    "ray_task_install",
    "ray_head",
    "ray_local",
    "collective",
    "nvml",
    "hf_constants",
    "libcuda_loaded",
    "parquet_schema",
    "torch_abi",
    "venv_prefix",
    "site_packages",
    "image_verify",
    "slurm_detect",
    "smoke_assets",
    "smoke_reward",
]
# name -> file in this folder (as cibuildwheel's util/resources.py names its resources)
SCRIPTS: dict[Script, str] = {
    "import_probe": "import_probe.py",
    "hydra_compose": "hydra_compose.py",
    "interpreter": "interpreter.py",
    "ray_every_node": "ray_every_node.py",
    "ray_task_detect": "ray_task_detect.py",
    "ray_task_install": "ray_task_install.py",
    "ray_head": "ray_head.py",  # doctor ray: a client's view of a running head
    "ray_local": "ray_local.py",  # doctor ray: a throwaway Ray started for real
    "collective": "collective.py",  # doctor collective: an all-reduce on every node
    "nvml": "nvml.py",  # host/nvidia.py: NVML, in a child that can be killed
    "hf_constants": "hf_constants.py",  # doctor hf-cache
    "libcuda_loaded": "libcuda_loaded.py",  # doctor cuda
    "parquet_schema": "parquet_schema.py",  # doctor's launch lint: the datasets' columns
    "torch_abi": "torch_abi.py",  # install: torch's C++ ABI against the flash-attn wheel's
    "venv_prefix": "venv_prefix.py",  # install: the moved venv runs where it is
    "site_packages": "site_packages.py",  # abi: an interpreter's site-packages
    "image_verify": "image_verify.py",  # docker build: the pins, inside the image (as text)
    "slurm_detect": "slurm_detect.py",  # detect --slurm: one srun task per node
    "smoke_assets": "smoke/make_assets.py",  # smoke: the tiny model and data, no download
    "smoke_reward": "smoke/tiny_reward.py",  # smoke: verl's custom_reward_function
}
# smoke: on the training run's PYTHONPATH, with verl's CPU plugins per verl minor (smoke/v0_9/).
SMOKE = HERE / "smoke"
# Run where this package is importable too (shipped by Ray's py_modules, or on PYTHONPATH for srun).
WITH_PACKAGE = ("ray_task_detect", "ray_task_install", "slurm_detect")
# Imported by the scripts beside them (a script's folder is first on its sys.path), never run.
SHARED = ("ray_script.py",)


def script_path(name: Script) -> Path:
    """The file to run, by path."""
    return HERE / SCRIPTS[name]


def script_text(name: Script) -> str:
    """The program's text, for a rendered file or a `-c` where no path reaches (a container)."""
    return script_path(name).read_text(encoding="utf-8")
