"""Values the templates need that take a decision: environment variables per era, the container
driver gate, and where a prebuilt flash-attn wheel would come from."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from packaging.version import Version

from verl_setup.matrix.schema import Row
from verl_setup.plan.select import Plan


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
        if ".".join(version.split(".")[:2]) == cuda:
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
class WheelPlan:
    """A prebuilt flash-attn wheel URL (with {abi} left for the script to fill), or why there is none."""

    url: str | None
    reason: str


def flash_attn_wheel(row: Row, python: str, wheels: dict[str, tuple[str, ...]], url: str) -> WheelPlan | None:
    """Where the prebuilt flash-attn wheel for this torch/CUDA/Python is, if the project built one."""
    version = row.packages.get("flash-attn")
    if version is None or row.torch.cuda is None:
        return None
    torch_minor = ".".join(row.torch.version.split("+")[0].split(".")[:2])
    py = "cp" + "".join(python.split(".")[:2])
    if torch_minor not in wheels.get(version, ()):
        return WheelPlan(
            url=None,
            reason=f"no wheel published for torch {torch_minor}, so it compiles from source",
        )
    filled = url.format(
        version=version, cuda_major=row.torch.cuda.split(".")[0], torch_minor=torch_minor, abi="{abi}", py=py
    )
    return WheelPlan(
        url=filled, reason=f"a prebuilt wheel for torch {torch_minor}, CUDA {row.torch.cuda}, {py}"
    )
