"""Values the templates need that take a decision: environment variables per era, the
container driver gate and the container Slurm's steps run in (where flash-attn comes from is
the recipe's: plan/recipe.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from packaging.version import Version

from verl_setup.errors import BadInputError
from verl_setup.matrix.schema import Row
from verl_setup.plan.select import Plan
from verl_setup.util.versions import minor_of


@dataclass(frozen=True, kw_only=True)
class EnvVar:
    """One variable: `set` assigns the value; `prepend` puts a folder in front of a search path."""

    name: str
    value: str
    why: str
    kind: Literal["set", "prepend"] = "set"


def environment(plan: Plan, hf_home: str | None, iface: str | None) -> list[EnvVar]:
    """The variables this row's era needs, and no others, each with the reason."""
    row, out = plan.row, []
    toolkit = _matching_toolkit(plan)
    if toolkit is not None:
        out += [
            EnvVar(
                name="CUDA_HOME",
                value=toolkit,
                why=f"the CUDA {row.requires.cuda} toolkit here, for JIT builds",
            ),
            EnvVar(name="PATH", value=f"{toolkit}/bin", why="its nvcc first", kind="prepend"),
            EnvVar(name="LD_LIBRARY_PATH", value=f"{toolkit}/lib64", why="its libraries", kind="prepend"),
        ]
    if hf_home:
        out += [
            EnvVar(name="HF_HOME", value=hf_home, why="one Hugging Face cache for every process and node"),
            EnvVar(name="HF_HUB_CACHE", value=f"{hf_home.rstrip('/')}/hub", why="the hub cache inside it"),
        ]
    if row.engine.name == "vllm" and row.engine.version:
        vllm = Version(row.engine.version)
        if vllm <= Version("0.6.3"):
            out.append(
                EnvVar(
                    name="VLLM_ATTENTION_BACKEND",
                    value="XFORMERS",
                    why="illegal memory access with vLLM <= 0.6.3 (verl v0.4.1 faq); set it before ray start",
                )
            )
        if Version("0.8") <= vllm < Version("0.9"):
            out.append(
                EnvVar(name="VLLM_USE_V1", value="1", why="verl's install docs (v0.5-v0.8) for vLLM 0.8.x")
            )
    if iface:
        out += [
            EnvVar(
                name="NCCL_SOCKET_IFNAME", value=iface, why="NCCL traffic on this interface (multi-NIC nodes)"
            ),
            EnvVar(
                name="GLOO_SOCKET_IFNAME", value=iface, why="Gloo (torch.distributed) on the same interface"
            ),
        ]
    out.append(
        EnvVar(
            name="TOKENIZERS_PARALLELISM",
            value="true",
            why="what verl's Ray runtime env sets; silences the fork warning",
        )
    )
    return out


def _matching_toolkit(plan: Plan) -> str | None:
    """A toolkit on the target whose major.minor equals the row's CUDA (never a newer one)."""
    cuda = plan.row.requires.cuda
    if cuda is None:
        return None
    for path, version in plan.target.cuda_toolkits:
        if minor_of(version) == cuda:
            return path
    return None


def nvidia_require_cuda(row: Row, policy: str) -> str | None:
    """NVIDIA_REQUIRE_CUDA for the image: `docker run` on a too-old driver then fails at start."""
    cuda = row.requires.cuda
    if cuda is None:
        return None
    if policy == "strict":
        return f"cuda>={cuda}"
    return f"cuda>={cuda.split('.')[0]}.0"  # the family floor: minor-version compatibility


@dataclass(frozen=True, kw_only=True)
class ForwardCompatImage:
    """What the image needs for CUDA forward compatibility (--policy forward on an older driver)."""

    package: str
    library_dir: str
    env: dict[str, str]


def forward_compat(plan: Plan) -> ForwardCompatImage | None:
    """The cuda-compat package and variables, when the plan rests on forward compatibility."""
    req, facts = plan.row.requires, plan.matrix.cuda.facts.forward_compat
    if not plan.needs_forward_compat or facts is None or req.cuda is None:
        return None  # the driver runs this CUDA itself: nothing to add
    major, minor = minor_of(req.cuda).split(".")
    fill = {"major": major, "minor": minor}
    return ForwardCompatImage(
        package=facts.package.format(**fill),
        library_dir=facts.library_dir.format(**fill),
        # The container toolkit's own gate would refuse the older driver before the compat
        # library could load; with forward compatibility that gate is wrong by design.
        env={"NVIDIA_DISABLE_REQUIRE": "true", **{k: v.format(**fill) for k, v in facts.env.items()}},
    )


ContainerKind = Literal["apptainer", "pyxis"]
CONTAINER_KINDS: tuple[ContainerKind, ...] = ("apptainer", "pyxis")


@dataclass(frozen=True, kw_only=True)
class ContainerSpec:
    """The image every Slurm step runs in: `apptainer exec --nv IMAGE`, or pyxis's
    `srun --container-image=IMAGE` (an enroot reference such as nvcr.io#nvidia/pytorch:25.01-py3,
    or a .sqsh file)."""

    kind: ContainerKind
    image: str


def container_spec(text: str) -> ContainerSpec:
    """`--container apptainer:IMAGE.sif` or `--container pyxis:IMAGE`."""
    kind, sep, image = text.partition(":")
    if not sep or not image.strip() or kind not in CONTAINER_KINDS:
        raise BadInputError(
            f"--container {text!r}: give apptainer:IMAGE.sif (apptainer exec --nv) or pyxis:IMAGE "
            "(srun --container-image)"
        )
    if any(c in image for c in "\n\r\0"):
        raise BadInputError(f"--container {text!r} contains a line break or NUL")
    return ContainerSpec(kind="apptainer" if kind == "apptainer" else "pyxis", image=image)
