"""The smallest changes that make a launch fit, as verl overrides: each candidate is applied to the
Setup and estimated again; those that fit are ranked by what they cost (offloading a frozen model
costs least, more GPUs most), and when no single change fits, the cheapest ones are combined."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from verl_setup.doctor.checks.memory.plan import Estimate, Setup, estimate

ACTOR = "actor_rollout_ref.actor"


@dataclass(frozen=True, kw_only=True)
class Change:
    """One change: its overrides, what it does, and the estimate with it."""

    overrides: tuple[str, ...]
    effect: str
    result: Estimate


Candidate = tuple[str, Callable[[Setup], Setup | None], Callable[[Setup], tuple[str, ...]]]


def _ref_offload(s: Setup) -> Setup | None:
    return (
        replace(s, ref=replace(s.ref, param_offload=True))
        if s.ref.present and not s.ref.param_offload
        else None
    )


def _critic_offload(s: Setup) -> Setup | None:
    c = s.critic
    if not c.present or (c.param_offload and c.optimizer_offload):
        return None
    return replace(s, critic=replace(c, param_offload=True, optimizer_offload=True))


def _actor_optimizer(s: Setup) -> Setup | None:
    return None if s.actor.optimizer_offload else replace(s, actor=replace(s.actor, optimizer_offload=True))


def _actor_params(s: Setup) -> Setup | None:
    return None if s.actor.param_offload else replace(s, actor=replace(s.actor, param_offload=True))


def _checkpointing(s: Setup) -> Setup | None:
    return None if s.checkpointing else replace(s, checkpointing=True)


def _free_cache(s: Setup) -> Setup | None:
    return None if s.free_cache_engine else replace(s, free_cache_engine=True)


def _lower_util(s: Setup) -> Setup | None:
    lower = round(s.utilization - 0.1, 2)
    return replace(s, utilization=lower) if lower >= 0.2 else None


def _fewer_tokens(s: Setup) -> Setup | None:
    if s.tokens_per_gpu and s.tokens_per_gpu > s.prompt_len + s.response_len:
        return replace(s, tokens_per_gpu=max(s.prompt_len + s.response_len, s.tokens_per_gpu // 2))
    return replace(s, micro_batch=max(1, s.micro_batch // 2)) if s.micro_batch > 1 else None


def _fewer_tokens_keys(s: Setup) -> tuple[str, ...]:
    if s.tokens_per_gpu:
        half = max(s.prompt_len + s.response_len, s.tokens_per_gpu // 2)
        return (f"{ACTOR}.ppo_max_token_len_per_gpu={half}",)
    return (f"{ACTOR}.ppo_micro_batch_size_per_gpu={max(1, s.micro_batch // 2)}",)


def _shorter_response(s: Setup) -> Setup | None:
    return replace(s, response_len=s.response_len // 2) if s.response_len >= 256 else None


def _more_gpus(s: Setup) -> Setup | None:
    if s.gpus_per_node < 8:
        return replace(s, gpus_per_node=min(8, s.gpus_per_node * 2))
    return replace(s, nnodes=s.nnodes * 2)


def _gpus_overrides(s: Setup) -> tuple[str, ...]:
    grown = _more_gpus(s)
    assert grown is not None  # noqa: S101  # more GPUs is always a candidate
    return (f"trainer.n_gpus_per_node={grown.gpus_per_node}", f"trainer.nnodes={grown.nnodes}")


def _offload_key(s: Setup, role: str, what: str) -> str:
    if s.strategy == "megatron":
        return f"{'critic' if role == 'critic' else 'actor_rollout_ref.' + role}.megatron.{what}=True"
    base = "critic.model" if role == "critic" else f"actor_rollout_ref.{role}"
    return f"{base}.fsdp_config.{what}=True"


# In order of cost: offloading a frozen model, then optimizer state, then the engine's share, ...
CANDIDATES: tuple[Candidate, ...] = (
    (
        "offload the reference model between phases",
        _ref_offload,
        lambda s: (_offload_key(s, "ref", "param_offload"),),
    ),
    (
        "offload the critic's parameters and optimizer",
        _critic_offload,
        lambda s: (
            _offload_key(s, "critic", "param_offload"),
            _offload_key(s, "critic", "optimizer_offload"),
        ),
    ),
    (
        "release the engine's memory during training",
        _free_cache,
        lambda _s: ("actor_rollout_ref.rollout.free_cache_engine=True",),
    ),
    (
        "offload the actor's optimizer state",
        _actor_optimizer,
        lambda s: (_offload_key(s, "actor", "optimizer_offload"),),
    ),
    ("offload the actor's parameters", _actor_params, lambda s: (_offload_key(s, "actor", "param_offload"),)),
    (
        "gradient checkpointing",
        _checkpointing,
        lambda _s: (
            "actor_rollout_ref.model.enable_gradient_checkpointing=True",
            "critic.model.enable_gradient_checkpointing=True",
        ),
    ),
    (
        "a smaller rollout reservation",
        _lower_util,
        lambda s: (f"actor_rollout_ref.rollout.gpu_memory_utilization={round(s.utilization - 0.1, 2)}",),
    ),
    (
        "fewer tokens per micro-batch",
        _fewer_tokens,
        _fewer_tokens_keys,
    ),
    (
        "a shorter response length",
        _shorter_response,
        lambda s: (f"data.max_response_length={s.response_len // 2}",),
    ),
    ("more GPUs", _more_gpus, _gpus_overrides),
)


def rank(setup: Setup, limit: int = 3) -> list[Change]:
    """Single changes that fit, cheapest first; else the cheapest changes combined until it fits."""
    fitting: list[Change] = []
    for effect, apply, keys in CANDIDATES:
        changed = apply(setup)
        if changed is None:
            continue
        result = estimate(changed)
        if result.fits:
            fitting.append(Change(overrides=keys(setup), effect=effect, result=result))
    if fitting:
        return fitting[:limit]
    current = setup
    overrides: list[str] = []
    effects: list[str] = []
    for effect, apply, keys in CANDIDATES:
        changed = apply(current)
        if changed is None or estimate(changed).peak.total >= estimate(current).peak.total:
            continue
        overrides += keys(current)
        effects.append(effect)
        current = changed
        result = estimate(current)
        if result.fits:
            return [Change(overrides=tuple(overrides), effect=" + ".join(effects), result=result)]
    return []
