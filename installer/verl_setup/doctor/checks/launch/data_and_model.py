"""Launch rules over the data and the model the launch command names, read without loading them.

The data files exist and have the prompt column (parquet schema via pyarrow in the target env),
the model path is a local model folder or a Hub id that is cached when offline, tensor parallel
divides the model's attention heads, rollout.mode is one the installed verl accepts, and the
dynamic-batch token limit holds one whole sequence.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from verl_setup.doctor.checks.launch.reader import MODEL, ROLLOUT, Note
from verl_setup.doctor.probes.data_files import parquet_columns
from verl_setup.doctor.probes.env import TargetEnv
from verl_setup.doctor.probes.launch_command import Resolver
from verl_setup.doctor.probes.model_files import HUB_ID, hub_snapshot, read_model
from verl_setup.doctor.result import Evidence, Finding

_MODE_ONLY = re.compile(r'self\.mode != "(\w+)"')
_MODE_USED = re.compile(r'rollout\.mode == "(\w+)"')
_MODE_REMOVED = re.compile(r'self\.mode == "(\w+)":\s*\n\s*raise')


def lint_targets(r: Resolver, target: TargetEnv, note: Note, evidence: list[Evidence]) -> list[Finding]:
    """Every rule over the files and values the launch points at."""
    findings = _data(r, target, note, evidence)
    model = _model(r, note, evidence, findings)
    findings += _heads(model, note)
    findings += _mode(r, note)
    findings += _dynamic_bsz(note)
    return findings


def paths(value: Any) -> list[str]:
    """A Hydra value naming one file or a list of them (`[a.parquet,b.parquet]`)."""
    if isinstance(value, list):
        return [str(v) for v in value]
    if not isinstance(value, str) or not value:
        return []
    text = value.strip()
    if text.startswith("[") and text.endswith("]"):
        return [p.strip().strip("'\"") for p in text[1:-1].split(",") if p.strip()]
    return [text]


def _data(r: Resolver, target: TargetEnv, note: Note, evidence: list[Evidence]) -> list[Finding]:
    prompt_key = note("data.prompt_key")
    prompt_key = prompt_key if isinstance(prompt_key, str) else "prompt"
    findings: list[Finding] = []
    files: list[str] = []
    for key in ("data.train_files", "data.val_files"):
        if r.launch.override(key) is None:
            continue  # verl's defaults are placeholders (~/data/rlhf/gsm8k/...): judge what was given
        value, _ = r.value(key)
        for name in paths(value):
            path = Path(name).expanduser()
            if not path.exists():
                findings.append(
                    Finding(
                        status="fail",
                        message=f"{key}: {name} does not exist here",
                        remedy="prepare the data (verl's examples/data_preprocess/*.py write "
                        "the parquet files) or point the key at the files; on a cluster every "
                        "node needs the same path",
                    )
                )
            elif path.suffix == ".parquet":
                files.append(str(path))
    columns = parquet_columns(target.python, files, r.env)
    if "" in columns:
        evidence.append(Evidence(name="parquet schema", value=str(columns[""]), source=target.python))
        return findings
    for file, names in columns.items():
        if isinstance(names, str):
            findings.append(Finding(status="fail", message=f"{file} is not a readable parquet file: {names}"))
            continue
        evidence.append(Evidence(name=f"columns of {Path(file).name}", value=", ".join(names), source=file))
        if prompt_key not in names:
            findings.append(
                Finding(
                    status="fail",
                    message=f"{file} has no {prompt_key!r} column (data.prompt_key): verl's dataset "
                    f"fails with a KeyError on the first batch; it has {', '.join(names)}",
                    remedy=f"set data.prompt_key to the column that holds the prompt, or rewrite the "
                    f"file with a {prompt_key!r} column of chat messages",
                )
            )
    return findings


def _model(r: Resolver, note: Note, evidence: list[Evidence], findings: list[Finding]) -> dict[str, Any]:
    """The model's config.json, when it can be read locally (for the heads rule)."""
    if r.launch.override(MODEL) is None:
        return {}  # verl's default (~/models/deepseek-llm-7b-chat) is a placeholder
    value = note(MODEL)
    if not isinstance(value, str) or not value:
        return {}
    path = Path(value).expanduser()
    local_looking = value.startswith(("/", ".", "~")) or path.exists()
    if local_looking:
        model = read_model(path)
        if model is None:
            findings.append(
                Finding(
                    status="fail",
                    message=f"{MODEL}={value} is no model folder here (no readable config.json)",
                    remedy="point it at the folder holding config.json and the weights; on a cluster the "
                    "same path must exist on every node (a shared filesystem), or use a Hub id",
                )
            )
            return {}
        evidence.append(Evidence(name="model config", value=str(path / "config.json"), source=MODEL))
        return model.config
    return _hub_model(r, value, evidence, findings)


def _hub_model(r: Resolver, value: str, evidence: list[Evidence], findings: list[Finding]) -> dict[str, Any]:
    if not HUB_ID.match(value):
        findings.append(
            Finding(
                status="fail",
                message=f"{MODEL}={value} is neither a local folder nor a Hub id (owner/name)",
                remedy="give an absolute path to the model folder or a Hub id (Qwen/Qwen2.5-0.5B-Instruct)",
            )
        )
        return {}
    snapshot = hub_snapshot(value, r.env)
    offline = r.env.get("HF_HUB_OFFLINE", "") not in ("", "0") or r.env.get(
        "TRANSFORMERS_OFFLINE", ""
    ) not in ("", "0")
    if snapshot is None and offline:
        findings.append(
            Finding(
                status="fail",
                message=f"{value} is not in the HF cache and HF_HUB_OFFLINE is set: the workers cannot "
                "load it",
                remedy=f"download it once online (`huggingface-cli download {value}`) into the cache the "
                "workers use, or unset HF_HUB_OFFLINE",
            )
        )
    if snapshot is None:
        return {}
    model = read_model(snapshot)
    evidence.append(Evidence(name="model config", value=str(snapshot / "config.json"), source="HF cache"))
    return model.config if model else {}


def _heads(config: dict[str, Any], note: Note) -> list[Finding]:
    heads = config.get("num_attention_heads")
    tp = note(f"{ROLLOUT}.tensor_model_parallel_size")
    if not isinstance(heads, int) or not isinstance(tp, int) or tp < 1 or heads % tp == 0:
        return []
    fits = [d for d in range(1, heads + 1) if heads % d == 0 and d <= max(tp, 1) * 2]
    return [
        Finding(
            status="fail",
            message=f"tensor_model_parallel_size={tp} does not divide the model's {heads} attention heads: "
            "the rollout engine refuses to start",
            remedy=f"use a tensor_model_parallel_size that divides {heads} ({', '.join(map(str, fits))})",
        )
    ]


def _mode(r: Resolver, note: Note) -> list[Finding]:
    """rollout.mode against the values the installed verl's code accepts."""
    mode = note(f"{ROLLOUT}.mode")
    if not isinstance(mode, str):
        return []
    package = r.config.config_dir.parent.parent
    only, used, removed = set(), set(), set()
    for file in [
        package / "workers/config/rollout.py",
        *package.glob("workers/*.py"),
        package / "trainer/ppo/ray_trainer.py",
    ]:
        try:
            text = file.read_text(encoding="utf-8")
        except OSError:
            continue
        only.update(_MODE_ONLY.findall(text))
        used.update(_MODE_USED.findall(text))
        removed.update(_MODE_REMOVED.findall(text))
    valid = only or used
    if not valid or (mode in valid and mode not in removed):
        return []
    return [
        Finding(
            status="fail",
            message=f"rollout.mode={mode} is "
            + ("removed" if mode in removed else "not a mode")
            + f" in verl {r.config.version} (it accepts {', '.join(sorted(valid - removed))})",
            remedy=f"set {ROLLOUT}.mode={sorted(valid - removed)[0]} or drop the override",
        )
    ]


def _dynamic_bsz(note: Note) -> list[Finding]:
    """With use_dynamic_bsz, one whole sequence must fit the per-GPU token budget (verl asserts it)."""
    if note("actor_rollout_ref.actor.use_dynamic_bsz") is not True:
        return []
    budget = note("actor_rollout_ref.actor.ppo_max_token_len_per_gpu")
    prompt, response = note("data.max_prompt_length"), note("data.max_response_length")
    if not all(isinstance(v, int) for v in (budget, prompt, response)):
        return []
    if budget >= prompt + response:
        return []
    return [
        Finding(
            status="fail",
            message=f"use_dynamic_bsz with ppo_max_token_len_per_gpu={budget} < max_prompt_length + "
            f"max_response_length = {prompt + response}: verl asserts max_token_len >= max_seq_len",
            remedy=f"set actor_rollout_ref.actor.ppo_max_token_len_per_gpu to at least {prompt + response}",
        )
    ]
