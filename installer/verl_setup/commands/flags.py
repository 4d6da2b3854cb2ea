"""The flag groups several commands share: the target machine, packages built against torch, artifacts.

Only argparse and the vocabularies are imported here: building a parser stays fast.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

from verl_setup.util.vocab import BACKEND_NAMES, ENGINE_NAMES, POLICIES, PREFERENCES


def whole(what: str, maximum: int) -> Callable[[str], int]:
    """An argparse type for a count or port: ASCII digits, bounded; a bad one is one error line."""

    def parse(text: str) -> int:
        from verl_setup.util.versions import parse_count  # noqa: PLC0415  # keep start-up lean

        return parse_count(text, what, maximum)

    return parse


def add_plan_flags(p: argparse.ArgumentParser) -> None:
    """The flags that describe the target machine; every command that plans takes them."""
    g = p.add_argument_group("target machine (flag > VERL_SETUP_* env > --host file > detection)")
    g.add_argument("--host", type=Path, metavar="FILE", help="a saved `verl-setup detect --json`")
    g.add_argument("--driver", metavar="VERSION", help="NVIDIA driver, e.g. 535.129.03")
    g.add_argument("--gpu", action="append", default=[], metavar="NAME", help="GPU model (repeatable)")
    g.add_argument("--sm", metavar="X.Y", help="compute capability of the GPUs")
    g.add_argument("--gpu-count", type=whole("GPU count", 4096), metavar="N", help="GPUs per node")
    g.add_argument("--no-gpu", action="store_true", help="plan for a machine without an NVIDIA GPU")
    g.add_argument("--npu", metavar="CHIP", help="Ascend NPU chip family, e.g. 910B (no --sm: not NVIDIA)")
    g.add_argument("--cann", metavar="VERSION", help="CANN toolkit on the Ascend target, e.g. 8.5.1")
    g.add_argument("--rocm", metavar="VERSION", help="ROCm on the AMD target (with --gpu MI300X), e.g. 7.0")
    g.add_argument("--arch", metavar="ARCH", help="CPU architecture of the target: x86_64 or aarch64")
    g.add_argument("--glibc", metavar="X.Y", help="glibc of the target, e.g. 2.35")
    g.add_argument("--python", metavar="X.Y[.Z]", help="Python to install")
    g.add_argument("--verl", metavar="PREFIX", help="verl version prefix, e.g. 0.7")
    g.add_argument("--engine", choices=ENGINE_NAMES, help="rollout engine")
    g.add_argument("--backend", choices=BACKEND_NAMES, help="training backend (default fsdp)")
    g.add_argument(
        "--policy", choices=POLICIES,
        help="driver policy (default compat; forward: CUDA forward compatibility in the image)",
    )  # fmt: skip
    g.add_argument(
        "--prefer", choices=PREFERENCES,
        help="among rows equally proven with the same verl: whole (default) takes one whose packages "
        "built against torch all come as wheels from an enabled wheel source; order: matrix order",
    )  # fmt: skip
    g.add_argument(
        "--row",
        metavar="ID",
        help="this matrix row instead of selecting one (what it fails becomes warnings)",
    )
    g.add_argument(
        "--matrix", type=Path, metavar="FILE", help="use this rows file instead of the bundled one"
    )


def add_recipe_flags(p: argparse.ArgumentParser) -> None:
    """How packages built against torch get in: a prebuilt wheel by default, else one of these."""
    g = p.add_argument_group(
        "packages built against torch: flash-attn, transformer-engine-torch, apex (by default a "
        "prebuilt wheel matching torch, else a refusal)"
    )
    g.add_argument(
        "--build", action="append", default=[], metavar="NAME",
        help="compile NAME after torch (needs nvcc; an hour or more; repeatable)",
    )  # fmt: skip
    g.add_argument("--build-flash-attn", action="store_true", help="the same as --build flash-attn")
    g.add_argument(
        "--wheel-source", action="append", default=[], metavar="SRC",
        help="a wheelhouse or PEP 503 index of prebuilt wheels (folder, file:// or http(s)://), tried "
        "before the matrix's sources; repeatable; also VERL_SETUP_WHEEL_SOURCES (comma-separated)",
    )  # fmt: skip
    g.add_argument(
        "--without", action="append", default=[], metavar="NAME",
        help="leave NAME out (the message says what verl then cannot do; repeatable)",
    )  # fmt: skip
    add_with_flags(p)


def add_with_flags(p: argparse.ArgumentParser) -> None:
    """The user's own packages, in uv's words; resolved with the row, whose pins never move."""
    g = p.add_argument_group(
        "your packages (resolved together with the row; the row's pins never move; a package named "
        "verl replaces the row's verl)"
    )
    g.add_argument(
        "--with", dest="with_", action="append", default=[], metavar="REQ",
        help="add a requirement (`math-verify`, `verl @ git+URL@COMMIT`; a ./path is editable); repeatable",
    )  # fmt: skip
    g.add_argument(
        "--with-requirements", action="append", default=[], type=Path, metavar="FILE",
        help="add every requirement of FILE (`-e PATH` lines editable); repeatable",
    )  # fmt: skip
    g.add_argument(
        "--with-editable", action="append", default=[], metavar="PATH",
        help="add the project at PATH editable (a verl checkout replaces the row's verl); repeatable",
    )  # fmt: skip
    g.add_argument(
        "--keep", action="append", default=[], metavar="NAME",
        help="keep NAME as installed (a site's own torch or flash-attn build); the ABI check still runs",
    )  # fmt: skip


def add_artifact_flags(p: argparse.ArgumentParser) -> None:
    """What the rendered files need beyond the plan (render and docker build)."""
    g = p.add_argument_group("artifact options")
    g.add_argument("--base-image", metavar="IMG", help="Dockerfile base image (default: the row's)")
    g.add_argument("--buildkit", action="store_true", help="use BuildKit cache mounts for uv")
    g.add_argument("--ca-bundle", type=Path, metavar="FILE", help="CA bundle for TLS-intercepting proxies")
    g.add_argument(
        "--container", metavar="KIND:IMAGE",
        help="run verl.sbatch's steps in an image: apptainer:IMAGE.sif (apptainer exec --nv) or "
        "pyxis:IMAGE (srun --container-image)",
    )  # fmt: skip
    g.add_argument("--hf-home", metavar="PATH", help="Hugging Face cache for every node")
    g.add_argument("--iface", metavar="NAME", help="network interface for NCCL and Gloo")
    g.add_argument("--image", metavar="IMG", help="container image for KubeRay")
    g.add_argument("--job", metavar="CMD", help="entrypoint of a KubeRay RayJob")
    g.add_argument(
        "--nodes",
        type=whole("node count", 100_000),
        default=1,
        metavar="N",
        help="nodes for Slurm/KubeRay (default 1)",
    )
    g.add_argument("--head-ip", default="127.0.0.1", metavar="ADDR", help="Ray head address")
    g.add_argument("--ray-port", type=whole("port", 65535), default=6379, metavar="PORT")
    g.add_argument("--dashboard-port", type=whole("port", 65535), default=8265, metavar="PORT")
    g.add_argument(
        "--venv", default=".venv", metavar="PATH",
        help="the venv setup-venv.sh makes and verl.sbatch runs from (relative: to the submit folder)",
    )  # fmt: skip
    g.add_argument("--namespace", default="default", metavar="NS", help="Kubernetes namespace")
    add_recipe_flags(p)
