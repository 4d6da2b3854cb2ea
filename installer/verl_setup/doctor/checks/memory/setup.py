"""A launch's memory knobs as the planner's Setup: each verl key read through `get` (the launch's
override, else the installed verl's config; None when neither says), else the default written here
(verl 0.9's, or the older one where older launches depend on it, as noted)."""

from __future__ import annotations

from typing import Any

from verl_setup.doctor.checks.memory.plan import Get, Role, Setup
from verl_setup.doctor.checks.memory.shape import ModelShape

ACTOR = "actor_rollout_ref.actor"
ROLLOUT = "actor_rollout_ref.rollout"


def _bool(value: Any, default: bool) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    return default


def _int(value: Any, default: int) -> int:
    if isinstance(value, bool):
        return default
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value)
    return default


def _float(value: Any, default: float) -> float:
    try:
        return float(value) if value is not None and not isinstance(value, bool) else default
    except (TypeError, ValueError):
        return default


def setup_from(
    get: Get,
    shape: ModelShape,
    *,
    gpu_bytes: int,
    gpus_per_node: int | None = None,
    host_bytes: int | None = None,
) -> Setup:
    """The Setup a launch describes; `gpus_per_node` (this host's) when the launch does not say."""
    per_node = _int(get("trainer.n_gpus_per_node"), gpus_per_node or 8)
    nnodes = _int(get("trainer.nnodes"), 1)
    megatron = str(get(f"{ACTOR}.strategy") or "").startswith("megatron") or any(
        get(f"{ACTOR}.megatron.{k}") is not None
        for k in ("tensor_model_parallel_size", "pipeline_model_parallel_size", "expert_model_parallel_size")
    )
    engine = f"{ACTOR}.megatron" if megatron else f"{ACTOR}.fsdp_config"
    actor = Role(
        present=True, trainable=True,
        param_offload=_bool(get(f"{engine}.param_offload"), False),
        optimizer_offload=_bool(get(f"{engine}.optimizer_offload"), False),
    )  # fmt: skip
    # verl creates the reference policy for a KL loss or a KL penalty in the reward; launches for
    # verl <= 0.3 set only algorithm.kl_ctrl.kl_coef, which then meant the in-reward penalty.
    in_reward = get("algorithm.use_kl_in_reward")
    ref_present = (
        _bool(get(f"{ACTOR}.use_kl_loss"), False)
        or _bool(in_reward, False)
        or (in_reward is None and get("algorithm.kl_ctrl.kl_coef") is not None)
    )
    ref_engine = "actor_rollout_ref.ref.megatron" if megatron else "actor_rollout_ref.ref.fsdp_config"
    ref = Role(
        present=ref_present, trainable=False, param_offload=_bool(get(f"{ref_engine}.param_offload"), False)
    )
    critic_present = str(get("algorithm.adv_estimator") or "gae") == "gae"
    critic_engine = "critic.megatron" if megatron else "critic.model.fsdp_config"
    critic = Role(
        present=critic_present, trainable=True,
        param_offload=_bool(get(f"{critic_engine}.param_offload"), False),
        optimizer_offload=_bool(get(f"{critic_engine}.optimizer_offload"), False),
    )  # fmt: skip
    world = per_node * nnodes
    micro = get(f"{ACTOR}.ppo_micro_batch_size_per_gpu")
    if micro is None and get(f"{ACTOR}.ppo_micro_batch_size") is not None:  # verl <= 0.2: global
        micro = max(1, _int(get(f"{ACTOR}.ppo_micro_batch_size"), world) // world)
    dynamic = _bool(get(f"{ACTOR}.use_dynamic_bsz"), False)
    return Setup(
        shape=shape, gpu_bytes=gpu_bytes, gpus_per_node=per_node, nnodes=nnodes, host_bytes=host_bytes,
        strategy="megatron" if megatron else "fsdp", actor=actor, ref=ref, critic=critic,
        fsdp_size=_int(get(f"{ACTOR}.fsdp_config.fsdp_size"), -1),
        ulysses=max(1, _int(get(f"{ACTOR}.ulysses_sequence_parallel_size"), 1)),
        micro_batch=max(1, _int(micro, 1)),
        tokens_per_gpu=_int(get(f"{ACTOR}.ppo_max_token_len_per_gpu"), 16384) if dynamic else None,
        prompt_len=_int(get("data.max_prompt_length"), 512),
        response_len=_int(get("data.max_response_length"), 512),
        # verl <= 0.3 defaulted to False; a launch that relies on 0.9's True is read through `get`.
        checkpointing=_bool(get("actor_rollout_ref.model.enable_gradient_checkpointing"), False),
        remove_padding=_bool(get("actor_rollout_ref.model.use_remove_padding"), False),
        utilization=_float(get(f"{ROLLOUT}.gpu_memory_utilization"), 0.5),
        free_cache_engine=_bool(get(f"{ROLLOUT}.free_cache_engine"), True),
        rollout_tp=max(1, _int(get(f"{ROLLOUT}.tensor_model_parallel_size"), 1)),
        tp=max(1, _int(get(f"{ACTOR}.megatron.tensor_model_parallel_size"), 1)),
        pp=max(1, _int(get(f"{ACTOR}.megatron.pipeline_model_parallel_size"), 1)),
        ep=max(1, _int(get(f"{ACTOR}.megatron.expert_model_parallel_size"), 1)),
        etp=_int(get(f"{ACTOR}.megatron.expert_tensor_parallel_size"), 0) or None,
    )  # fmt: skip
