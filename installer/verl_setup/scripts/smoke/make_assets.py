"""Make a smoke run's inputs with no download: a tiny Qwen2 with random weights, its tokenizer, data.

Run by `verl-setup smoke` in the target env: `python make_assets.py OUT [--model PATH]`. It writes
OUT/model (config, safetensors, a BPE tokenizer trained here with `tokenizers`, a chat template) unless
--model names the user's own, and OUT/data/{train,val}.parquet in verl's gsm8k layout (a chat prompt,
reward_model.ground_truth). It prints one JSON line: the model path, its parameter count, the
rows. Only tokenizers, numpy,
safetensors and pandas are imported (no torch): seconds, where importing torch alone takes a minute
on a loaded 2-core host.
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path
from typing import Any

CHAT_TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}<|end|>{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)
SPECIAL = ["<|pad|>", "<|end|>", "<|user|>", "<|assistant|>", "<|system|>"]
ROWS = 16


def prompts(seed: int) -> list[tuple[str, str]]:
    """Sums with their answers: the reward can tell a right answer from a near one."""
    rng = random.Random(seed)
    out = []
    for _ in range(ROWS):
        a, b = rng.randint(1, 49), rng.randint(1, 49)
        out.append((f"What is {a} plus {b}? End with #### and the number.", str(a + b)))
    return out


def tokenizer(folder: Path) -> Any:
    """A byte-level BPE trained here, saved as transformers' PreTrainedTokenizerFast reads it."""
    from tokenizers import (  # type: ignore[import-not-found, unused-ignore]
        Tokenizer,
        decoders,
        models,
        pre_tokenizers,
        trainers,
    )

    corpus = [q + " #### " + a for q, a in prompts(1)] + [str(n) for n in range(100)]
    tok = Tokenizer(models.BPE(unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=300, special_tokens=SPECIAL, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tok.train_from_iterator(corpus, trainer=trainer)
    folder.mkdir(parents=True, exist_ok=True)
    tok.save(str(folder / "tokenizer.json"))
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "eos_token": "<|end|>",
        "pad_token": "<|pad|>",
        "chat_template": CHAT_TEMPLATE,
        "model_max_length": 256,
        "clean_up_tokenization_spaces": False,
    }
    (folder / "tokenizer_config.json").write_text(json.dumps(config, indent=2))
    return tok


def model(folder: Path, tok: Any) -> int:
    """A 2-layer Qwen2 with random weights (normal, std 0.02, as Qwen2's init), written with numpy:
    torch and transformers are not imported, so making it takes seconds on a busy host."""
    import numpy as np  # type: ignore[import-not-found, unused-ignore]
    from safetensors.numpy import save_file  # type: ignore[import-not-found, unused-ignore]

    rng = np.random.default_rng(0)
    vocab, hidden, inter, layers, heads, kv = tok.get_vocab_size(), 128, 256, 2, 2, 1
    head = hidden // heads
    eos, pad = tok.token_to_id("<|end|>"), tok.token_to_id("<|pad|>")
    config = {
        "architectures": ["Qwen2ForCausalLM"],
        "model_type": "qwen2",
        "vocab_size": vocab,
        "hidden_size": hidden,
        "intermediate_size": inter,
        "num_hidden_layers": layers,
        "num_attention_heads": heads,
        "num_key_value_heads": kv,
        "head_dim": head,
        "max_position_embeddings": 256,
        "hidden_act": "silu",
        "rms_norm_eps": 1e-6,
        "rope_theta": 10000.0,
        "tie_word_embeddings": True,
        "torch_dtype": "float32",
        "eos_token_id": eos,
        "pad_token_id": pad,
        "bos_token_id": None,
        "use_cache": True,
    }
    (folder / "config.json").write_text(json.dumps(config, indent=2))
    (folder / "generation_config.json").write_text(json.dumps({"eos_token_id": eos, "pad_token_id": pad}))

    def normal(*shape: int) -> Any:
        return rng.normal(0.0, 0.02, size=shape).astype(np.float32)

    weights: dict[str, Any] = {
        "model.embed_tokens.weight": normal(vocab, hidden),
        "model.norm.weight": np.ones(hidden, np.float32),
    }
    for i in range(layers):
        p = f"model.layers.{i}."
        weights |= {
            p + "self_attn.q_proj.weight": normal(heads * head, hidden),
            p + "self_attn.q_proj.bias": np.zeros(heads * head, np.float32),
            p + "self_attn.k_proj.weight": normal(kv * head, hidden),
            p + "self_attn.k_proj.bias": np.zeros(kv * head, np.float32),
            p + "self_attn.v_proj.weight": normal(kv * head, hidden),
            p + "self_attn.v_proj.bias": np.zeros(kv * head, np.float32),
            p + "self_attn.o_proj.weight": normal(hidden, heads * head),
            p + "mlp.gate_proj.weight": normal(inter, hidden),
            p + "mlp.up_proj.weight": normal(inter, hidden),
            p + "mlp.down_proj.weight": normal(hidden, inter),
            p + "input_layernorm.weight": np.ones(hidden, np.float32),
            p + "post_attention_layernorm.weight": np.ones(hidden, np.float32),
        }
    save_file(weights, str(folder / "model.safetensors"), metadata={"format": "pt"})
    return int(sum(w.size for w in weights.values()))


def data(folder: Path) -> None:
    import pandas  # type: ignore[import-not-found, import-untyped, unused-ignore]

    folder.mkdir(parents=True, exist_ok=True)
    for split, seed in (("train", 1), ("val", 2)):
        rows = [
            {
                "data_source": "verl_setup_smoke",
                "prompt": [{"role": "user", "content": q}],
                "ability": "math",
                "reward_model": {"style": "rule", "ground_truth": a},
                "extra_info": {"split": split, "index": i},
            }
            for i, (q, a) in enumerate(prompts(seed))
        ]
        pandas.DataFrame(rows).to_parquet(folder / f"{split}.parquet")


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("out", type=Path)
    p.add_argument("--model", type=Path)
    args = p.parse_args()
    params: int | None = None
    if args.model is None:
        folder = args.out / "model"
        tok = tokenizer(folder)
        params = model(folder, tok)
    else:
        folder = args.model
    data(args.out / "data")
    print(json.dumps({"model": str(folder), "parameters": params, "rows": ROWS}))


if __name__ == "__main__":
    main()
