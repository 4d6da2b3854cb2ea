"""The closed vocabularies, written once: help text, validation and JSON all read them from here."""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from typing import Literal, get_args

EngineName = Literal["vllm", "sglang", "none"]
ENGINE_NAMES: tuple[EngineName, ...] = get_args(EngineName)
ROLLOUT_ENGINES: tuple[EngineName, ...] = ("vllm", "sglang")  # the engines that serve rollouts

BackendName = Literal["fsdp", "megatron"]  # verl's training backends ([fsdp] / [megatron] extras)
BACKEND_NAMES: tuple[BackendName, ...] = get_args(BackendName)

# compat: minor-version compatibility; strict: full support only; forward: NVIDIA's CUDA forward
# compatibility (a cuda-compat user-mode driver inside the image, data-center GPUs only).
Policy = Literal["compat", "strict", "forward"]
POLICIES: tuple[Policy, ...] = get_args(Policy)

# How fitting rows of the same proof and verl are ordered: whole (default): a row whose every
# package built against torch comes as a wheel from an enabled source first; order: file order.
Prefer = Literal["whole", "order"]
PREFERENCES: tuple[Prefer, ...] = get_args(Prefer)

# trains: verl's own main_ppo ran real steps in the env (`verl-setup smoke`; on CPU for the cpu row,
# on a GPU host for a GPU row, which the proof names)
ProofLevel = Literal["resolves", "installs", "imports", "trains", "gpu"]
PROOF_LEVELS: tuple[ProofLevel, ...] = get_args(ProofLevel)

# The stages of a smoke run, in order: a failure names the one it stopped in.
SmokeStage = Literal["assets", "ray start", "workers", "rollout start", "first step", "update", "checkpoint"]
SMOKE_STAGES: tuple[SmokeStage, ...] = get_args(SmokeStage)

RenderTarget = Literal["venv", "docker", "apptainer", "env", "ray", "slurm", "kuberay", "uv-project"]
RENDER_TARGETS: tuple[RenderTarget, ...] = get_args(RenderTarget)

HostKindName = Literal["linux", "wsl", "jetson"]
HOST_KINDS: tuple[HostKindName, ...] = get_args(HostKindName)

CheckId = Literal[
    "python",
    "pins",
    "cuda",
    "ray",
    "collective",
    "hf-cache",
    "gpu-memory",
    "memory",
    "fit",
    "engine-env",
    "launch",
    "accelerator",
]
CHECK_IDS: tuple[CheckId, ...] = get_args(CheckId)


def suggest(word: str, choices: Iterable[str]) -> str:
    """` (did you mean 'x'?)` for the closest choice, or nothing: the one "did you mean"."""
    close = difflib.get_close_matches(word, list(choices), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""
