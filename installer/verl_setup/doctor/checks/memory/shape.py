"""A model's size as the planner needs it, counted from its config.json (Hugging Face keys): the
parameters (dense and expert), and the widths activations and logits scale with. Counted, not
guessed: a config without the keys gives None."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, kw_only=True)
class ModelShape:
    """Parameter counts and widths of one model."""

    params: int  # all parameters
    expert_params: int  # those in routed experts (0 for a dense model)
    layers: int
    hidden: int
    vocab: int
    kv_heads: int
    head_dim: int

    @property
    def dense_params(self) -> int:
        """Parameters outside the routed experts."""
        return self.params - self.expert_params

    @property
    def layer_params(self) -> int:
        """One decoder layer's parameters (what FSDP gathers at a time)."""
        return (self.params - self.vocab * self.hidden) // max(1, self.layers)


def _int(config: Mapping[str, Any], *keys: str) -> int:
    for key in keys:
        value = config.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return 0


def shape_of(config: Mapping[str, Any]) -> ModelShape | None:
    """Count a decoder-only transformer's parameters from its config (text_config for a VLM)."""
    text = config.get("text_config")
    if isinstance(text, Mapping) and not _int(config, "hidden_size"):
        config = text
    hidden = _int(config, "hidden_size", "n_embd", "d_model")
    layers = _int(config, "num_hidden_layers", "n_layer", "num_layers")
    vocab = _int(config, "vocab_size")
    heads = _int(config, "num_attention_heads", "n_head")
    if not (hidden and layers and vocab and heads):
        return None
    kv_heads = _int(config, "num_key_value_heads") or heads
    head_dim = _int(config, "head_dim") or hidden // heads
    inter = _int(config, "intermediate_size", "ffn_hidden_size") or 4 * hidden
    attention = hidden * heads * head_dim * 2 + hidden * kv_heads * head_dim * 2  # q, o; k, v
    experts = _int(config, "num_experts", "num_local_experts", "n_routed_experts")
    moe_inter = _int(config, "moe_intermediate_size") or inter
    dense_mlp = 3 * hidden * inter  # gate, up, down
    if experts:
        first_dense = _int(config, "first_k_dense_replace")
        shared = _int(config, "n_shared_experts") * 3 * hidden * moe_inter
        shared += 3 * hidden * _int(config, "shared_expert_intermediate_size")
        moe_layers = layers - first_dense
        expert = moe_layers * experts * 3 * hidden * moe_inter
        mlp = first_dense * dense_mlp + moe_layers * (shared + hidden * experts) + expert
    else:
        expert = 0
        mlp = layers * dense_mlp
    embeddings = vocab * hidden * (1 if config.get("tie_word_embeddings") else 2)
    params = layers * (attention + 2 * hidden) + mlp + embeddings + hidden
    return ModelShape(
        params=params, expert_params=expert, layers=layers, hidden=hidden, vocab=vocab,
        kv_heads=kv_heads, head_dim=head_dim,
    )  # fmt: skip
