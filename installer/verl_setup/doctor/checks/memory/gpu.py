"""doctor memory's GPU side: estimates, each with its formula, from the launch's model folder
(config.json, the weights' size), the launch's values (else the installed verl's defaults) and the
GPUs' memory. The rollout engine may use gpu_memory_utilization of each GPU: the weights' share
of it (over tensor parallel) comes first, the KV cache gets the rest, and it must hold at least one
sequence of max_model_len or the engine stops ("No available memory for the cache blocks"). The
trainer's fp32 logits (micro-batch x sequence x vocabulary x 4 B) are the allocation verl#2828's
OOM was. The engine's own activation profile is not counted: the KV room is an upper bound."""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

from verl_setup.doctor.probes.launch_command import Resolver, hydra_value
from verl_setup.doctor.probes.model_files import read_model
from verl_setup.doctor.probes.verl_config import MISSING
from verl_setup.doctor.result import Evidence, Finding

if TYPE_CHECKING:  # only annotations: diagnose imports this package without doctor's context
    from verl_setup.doctor.context import Context

GIB = 1024**3
ROLLOUT = "actor_rollout_ref.rollout"
# verl 0.9.1's defaults, for a launch checked without the installed verl's config.
DEFAULTS: dict[str, Any] = {
    f"{ROLLOUT}.gpu_memory_utilization": 0.5,
    f"{ROLLOUT}.tensor_model_parallel_size": 2,
    f"{ROLLOUT}.max_model_len": None,
    "data.max_prompt_length": 512,
    "data.max_response_length": 512,
    "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu": None,
}


def _value(ctx: Context, key: str) -> Any:
    config, _ = ctx.verl_config if ctx.launch is not None else (None, "")
    if ctx.launch is not None and config is not None:
        value, _ = Resolver(ctx.launch, config, ctx.env).value(key)
        return DEFAULTS.get(key) if value is MISSING else value
    given = ctx.launch.override(key) if ctx.launch else None
    return hydra_value(given.value) if given and given.value else DEFAULTS.get(key)


def gpu_estimates(ctx: Context, evidence: list[Evidence]) -> list[Finding]:
    """Rollout weights + KV room per GPU, and the trainer's logits; a finding when KV cannot fit."""
    given = ctx.launch.override("actor_rollout_ref.model.path") if ctx.launch else None
    model = read_model(Path(str(hydra_value(given.value))).expanduser()) if given and given.value else None
    totals = [g.memory_total_mib for g in ctx.facts.gpus if g.memory_total_mib]
    if model is None or not model.weight_bytes or not totals:
        return []
    c = model.config
    layers = int(c.get("num_hidden_layers") or 0)
    heads = int(c.get("num_attention_heads") or 0)
    kv_heads = int(c.get("num_key_value_heads") or heads)
    head_dim = int(c.get("head_dim") or (int(c.get("hidden_size") or 0) // max(1, heads)))
    if not (layers and heads and head_dim):
        return []
    gpu = min(totals) * 2**20
    util = float(_value(ctx, f"{ROLLOUT}.gpu_memory_utilization") or 0.5)
    tp = max(1, int(_value(ctx, f"{ROLLOUT}.tensor_model_parallel_size") or 1))
    seq = int(_value(ctx, "data.max_prompt_length") or 0) + int(_value(ctx, "data.max_response_length") or 0)
    max_len = int(_value(ctx, f"{ROLLOUT}.max_model_len") or seq)
    weights = model.weight_bytes // tp
    kv_room = int(util * gpu) - weights
    per_token = 2 * layers * math.ceil(kv_heads / tp) * head_dim * 2  # K and V, bf16, this GPU's heads
    one_seq = per_token * max_len
    evidence.append(
        Evidence(
            name="GPU estimate (rollout)",
            value=f"weights {weights / GIB:.1f} GiB per GPU (weights / TP {tp}); KV room "
            f"{kv_room / GIB:.1f} GiB (gpu_memory_utilization {util} x {gpu / GIB:.1f} GiB - weights); "
            f"one {max_len}-token sequence's KV {one_seq / 2**20:.0f} MiB "
            f"(2 x {layers} layers x {math.ceil(kv_heads / tp)} KV heads x {head_dim} x 2 B x {max_len})",
            source=f"estimate; {model.path}/config.json and the launch",
        )
    )
    micro = _value(ctx, "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu")
    vocab = int(c.get("vocab_size") or 0)
    if isinstance(micro, int) and vocab:
        logits = micro * seq * vocab * 4
        evidence.append(
            Evidence(
                name="GPU estimate (trainer)",
                value=f"logits {logits / GIB:.1f} GiB per micro-batch (ppo_micro_batch_size_per_gpu {micro} "
                f"x {seq} tokens x vocab {vocab} x 4 B fp32), beside the FSDP shards and activations",
                source="estimate; verl computes log-probs and entropy from fp32 logits",
            )
        )
    if kv_room <= 0:
        return [
            Finding(
                status="fail",
                message=f"the rollout weights ({weights / GIB:.1f} GiB per GPU) fill "
                f"gpu_memory_utilization={util} of {gpu / GIB:.1f} GiB (estimate): vLLM stops with "
                "'No available memory for the cache blocks'",
                remedy=f"raise {ROLLOUT}.gpu_memory_utilization or {ROLLOUT}.tensor_model_parallel_size",
            )
        ]
    if kv_room < one_seq:
        return [
            Finding(
                status="warn",
                message=f"the KV room ({kv_room / 2**20:.0f} MiB, estimate) is less than one {max_len}-token "
                f"sequence needs ({one_seq / 2**20:.0f} MiB): the engine refuses max_model_len",
                remedy=f"raise {ROLLOUT}.gpu_memory_utilization or tensor_model_parallel_size, or lower "
                f"{ROLLOUT}.max_model_len",
            )
        ]
    return []
