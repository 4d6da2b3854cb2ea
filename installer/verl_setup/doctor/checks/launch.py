"""Check `launch`: lint the command after `--` against the installed verl's own config.

The rules are verl's own: Hydra's struct mode (a new key needs `+`), verl's batch-size asserts
(verl/utils/config.py, ray_trainer.py, fsdp_workers.py) and the engine it will import.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from packaging.version import InvalidVersion, Version

from verl_setup.doctor.checks.known_issues import known_issue_findings
from verl_setup.doctor.checks.launch_hydra import lint_with_hydra
from verl_setup.doctor.checks.launch_targets import lint_targets
from verl_setup.doctor.context import Context
from verl_setup.doctor.probes.launch_command import Launch, Resolver
from verl_setup.doctor.probes.verl_config import MISSING, VerlConfig
from verl_setup.doctor.result import CheckResult, Evidence, Finding, fold, skip

ID = "launch"
ROLLOUT = "actor_rollout_ref.rollout"
ACTOR = "actor_rollout_ref.actor"
# rollout.name -> the distribution verl imports for it.
ENGINE_DIST = {
    "vllm": "vllm",
    "sglang": "sglang",
    "sglang_async": "sglang",
    "trtllm": "tensorrt-llm",
    "hf": "transformers",
}
# How verl's workers dispatch on rollout.name, across releases.
_ROLLOUT_NAMES = re.compile(
    r'rollout_name == "(\w+)"|rollout_name in \[([^\]]*)\]|RolloutReplicaRegistry\.register\("(\w+)"'
)
# Keys users copy from blog posts that verl never had, with what does the job instead.
KNOWN_NON_KEYS = {
    "trainer.ray_address": "verl reads no such key: it calls ray.init(), which takes the head from "
    "RAY_ADDRESS (export RAY_ADDRESS=<head-ip>:6379) or from `ray start` on this machine",
}


def check_launch(ctx: Context) -> CheckResult:
    """Lint the launch command; say what rollout.n does in the installed verl."""
    if ctx.launch is None:
        return skip(ID, "no launch command given (append: -- python3 -m verl.trainer.main_ppo key=value ...)")
    launcher = lint_launcher(ctx.launch)
    config, why = ctx.verl_config
    target, _ = ctx.target
    if config is None or target is None:
        if launcher:
            return fold(ID, launcher, [Evidence(name="config", value="not read", source=why)], ok="")
        return skip(ID, f"cannot lint against verl's config: {why}")
    resolver = Resolver(ctx.launch, config, ctx.env)
    evidence = [
        Evidence(name="verl", value=config.version, source=f"installed in {target.prefix}"),
        Evidence(name="config", value=str(config.source), source="the YAML the installed verl ships"),
    ]
    findings = launcher + lint_keys(ctx.launch, config)
    findings += lint_values(resolver, target.dists, evidence, known_rollouts(config))
    findings += explain_rollout_n(resolver, config, evidence)
    findings += lint_targets(resolver, target, noter(resolver, evidence), evidence)
    findings += lint_with_hydra(ctx.launch, config, target, ctx.env, evidence)
    findings += known_issue_findings(ctx.row[0], ctx.launch)  # in full where the launch uses it
    return fold(ID, findings, evidence, ok="launch command fits the installed verl's config")


def lint_launcher(launch: Launch) -> list[Finding]:
    """verl's PPO entry starts its own workers through Ray: torchrun in front of it runs N drivers."""
    if launch.launcher is None or not (launch.module or "").endswith("main_ppo"):
        return []
    return [
        Finding(
            status="warn",
            message=f"{launch.launcher} starts {launch.module} once per GPU, but verl launches through "
            "Ray: each copy is a driver that asks Ray for every GPU (verl#2705)",
            remedy=f"run `python3 -m {launch.module} ...` once (trainer.n_gpus_per_node and trainer.nnodes "
            "size the job), against a Ray cluster for several nodes; torchrun is for verl's SFT trainer",
        )
    ]


def lint_keys(launch: Launch, config: VerlConfig) -> list[Finding]:
    """Hydra struct mode: plain keys must exist, `+` keys must not, `~` keys must."""
    findings = []
    for o in launch.overrides:
        head = o.key.split(".")[0]
        group = o.key.split("@")[0]
        if head == "hydra" or group in config.groups or config.is_unchecked(o.key):
            continue
        exists = config.has(o.key)
        if o.prefix == "" and not exists:
            hint = KNOWN_NON_KEYS.get(o.key)
            near = config.suggest(o.key)
            remedy = (
                hint
                or (f"did you mean {near}? " if near else "")
                + f"If the code you run reads it, add it as +{o.text}"
            )
            findings.append(
                Finding(
                    status="fail",
                    message=f"{o.key} is not in verl {config.version}'s config: Hydra stops with "
                    f"\"Could not override '{o.key}'\" (key not in struct)",
                    remedy=remedy,
                )
            )
        elif o.prefix == "+" and exists:
            findings.append(
                Finding(
                    status="fail",
                    message=f"+{o.key}: the key already exists in verl {config.version}'s config "
                    f"(Hydra: \"Could not append to config. An item is already at '{o.key}'\")",
                    remedy=f"drop the '+': {o.text[1:]}",
                )
            )
        elif o.prefix == "~" and not exists:
            findings.append(
                Finding(
                    status="fail",
                    message=f"~{o.key}: nothing to delete, verl {config.version}'s config has no such key",
                    remedy=f"remove {o.text}",
                )
            )
    return findings


def known_rollouts(config: VerlConfig) -> set[str]:
    """The rollout names the installed verl's workers dispatch on (empty if none are found)."""
    workers = config.config_dir.parent.parent / "workers"
    names: set[str] = set()
    for file in [*workers.glob("*.py"), *workers.glob("rollout/*.py")]:
        try:
            text = file.read_text(encoding="utf-8")
        except OSError:
            continue
        for single, listed, registered in _ROLLOUT_NAMES.findall(text):
            names.update(n for n in (single, registered) if n)
            names.update(re.findall(r'"(\w+)"', listed))
    return names


def lint_values(
    r: Resolver, dists: Mapping[str, str], evidence: list[Evidence], known: set[str]
) -> list[Finding]:
    """Engine known and installed, parallel sizes, memory share, and verl's batch-size asserts."""
    findings: list[Finding] = []
    note = noter(r, evidence)
    name = note(f"{ROLLOUT}.name")
    if name == "???":
        findings.append(
            Finding(
                status="fail",
                message=f"{ROLLOUT}.name is mandatory in verl {r.config.version} and not set",
                remedy=f"add {ROLLOUT}.name=vllm (or sglang)",
            )
        )
    elif isinstance(name, str) and known and name not in known:
        findings.append(
            Finding(
                status="fail",
                message=f"rollout.name={name} is not an engine verl {r.config.version} knows "
                f"({', '.join(sorted(known))})",
                remedy=f"set {ROLLOUT}.name to one of {', '.join(sorted(known))}",
            )
        )
    elif isinstance(name, str) and name in ENGINE_DIST and ENGINE_DIST[name] not in dists:
        findings.append(
            Finding(
                status="fail",
                message=f"rollout.name={name} but {ENGINE_DIST[name]} is not installed in this env",
                remedy=f"install a matrix row with the {name} engine (verl-setup install --engine "
                f"{name}), or set rollout.name to an engine that is installed",
            )
        )

    gmu = note(f"{ROLLOUT}.gpu_memory_utilization")
    if isinstance(gmu, (int, float)) and not isinstance(gmu, bool) and not 0 < gmu <= 1:
        findings.append(
            Finding(
                status="fail",
                message=f"gpu_memory_utilization={gmu} is outside (0, 1]: it is a share of GPU memory",
                remedy="use a share such as 0.5 (0.5-0.7 without offload, 0.8-0.9 with offload)",
            )
        )

    per_node = note("trainer.n_gpus_per_node")
    nnodes = note("trainer.nnodes")
    tp = note(f"{ROLLOUT}.tensor_model_parallel_size")
    if _ints(per_node, tp) and tp > 0 and per_node % tp:
        findings.append(
            Finding(
                status="fail",
                message=f"tensor_model_parallel_size={tp} does not divide n_gpus_per_node={per_node}",
                remedy=f"use a tensor_model_parallel_size that divides {per_node} (for example "
                f"{_largest_divisor(per_node, tp)})",
            )
        )
    if _ints(per_node, nnodes) and not note(f"{ACTOR}.use_dynamic_bsz"):
        findings += _batch_rules(r, note, per_node * nnodes)
    return findings


def noter(r: Resolver, evidence: list[Evidence]) -> Callable[[str], Any]:
    """A reader of effective values that records each one it reads as evidence (once)."""
    seen: set[str] = {e.name for e in evidence}

    def note(key: str) -> Any:
        value, source = r.value(key)
        if value is not MISSING and key not in seen:
            seen.add(key)
            evidence.append(Evidence(name=key, value=repr(value), source=source))
        return value

    return note


def _batch_rules(r: Resolver, note: Any, n_gpus: int) -> list[Finding]:
    """verl's own asserts, in the order verl runs them."""
    findings = []
    train = note("data.train_batch_size")
    n = note(f"{ROLLOUT}.n")
    mini = note(f"{ACTOR}.ppo_mini_batch_size")
    micro = note(f"{ACTOR}.ppo_micro_batch_size")
    micro_gpu = note(f"{ACTOR}.ppo_micro_batch_size_per_gpu")
    sp = note(f"{ACTOR}.ulysses_sequence_parallel_size")
    sp = sp if _ints(sp) and sp > 0 else 1
    if _ints(train, n) and n_gpus > 0 and (train * n) % n_gpus:
        findings.append(
            Finding(
                status="fail",
                message=f"data.train_batch_size x rollout.n = {train * n} is not divisible by "
                f"nnodes x n_gpus_per_node = {n_gpus} (verl: real_train_batch_size must be divisible)",
                remedy=f"make train_batch_size x n a multiple of {n_gpus}",
            )
        )
    if _ints(train, mini) and train < mini:
        findings.append(
            Finding(
                status="fail",
                message=f"data.train_batch_size={train} < actor.ppo_mini_batch_size={mini} "
                "(verl: train_batch_size must be >= ppo_mini_batch_size)",
                remedy=f"lower ppo_mini_batch_size to at most {train}",
            )
        )
    if _ints(mini, n) and n_gpus // sp > 0:
        normalized = mini * n // (n_gpus // sp)
        if normalized <= 0:
            findings.append(
                Finding(
                    status="fail",
                    message=f"ppo_mini_batch_size x n / (GPUs / sp) = {normalized}: verl asserts it is > 0",
                    remedy=f"raise ppo_mini_batch_size to at least {(n_gpus // sp + n - 1) // n}",
                )
            )
        elif _ints(micro_gpu) and micro_gpu > 0 and normalized % micro_gpu:
            findings.append(
                Finding(
                    status="fail",
                    message=f"per-GPU mini-batch {normalized} (ppo_mini_batch_size {mini} x n {n} / "
                    f"{n_gpus // sp} GPUs) is not divisible by ppo_micro_batch_size_per_gpu={micro_gpu}",
                    remedy=f"pick ppo_micro_batch_size_per_gpu dividing {normalized} (for example "
                    f"{_largest_divisor(normalized, micro_gpu)})",
                )
            )
    if micro is None and micro_gpu is None:
        findings.append(
            Finding(
                status="fail",
                message="neither actor.ppo_micro_batch_size_per_gpu nor actor.ppo_micro_batch_size is set "
                "(verl: 'Please set at least one of ...' unless use_dynamic_bsz)",
                remedy=f"add {ACTOR}.ppo_micro_batch_size_per_gpu=<n>",
            )
        )
    logprob = [r.value(f"{ROLLOUT}.log_prob_micro_batch_size{s}")[0] for s in ("", "_per_gpu")]
    if logprob[0] is None and logprob[1] is None:
        findings.append(
            Finding(
                status="fail",
                message="neither rollout.log_prob_micro_batch_size_per_gpu nor "
                "rollout.log_prob_micro_batch_size is set (verl: 'Please set at least one of ...')",
                remedy=f"add {ROLLOUT}.log_prob_micro_batch_size_per_gpu=<n>",
            )
        )
    return findings


def explain_rollout_n(r: Resolver, config: VerlConfig, evidence: list[Evidence]) -> list[Finding]:
    """What rollout.n does in this verl version, with the line of verl's code that does it."""
    n, _ = r.value(f"{ROLLOUT}.n")
    if not _ints(n):
        return []
    if n < 1:
        return [Finding(status="fail", message=f"rollout.n={n}: needs at least 1 sample per prompt")]
    train, _ = r.value("data.train_batch_size")
    per_step = f"; {train} prompts x {n} = {train * n} trajectories per step" if _ints(train) else ""
    package = config.config_dir.parent.parent
    try:
        era2 = Version(config.version) >= Version("0.5.0")
    except InvalidVersion:
        return []
    if era2:
        where = _find(package / "trainer/ppo/ray_trainer.py", r"gen_batch\w*\s*=\s*gen_batch\.repeat\(")
        text = (
            f"rollout.n={n}: verl {config.version} repeats each prompt n times in the trainer before "
            "generation, and each copy is its own engine request with n=1 (batched by the engine's "
            "scheduler, prompt prefill shared only through prefix caching within one replica)"
        )
    else:
        where = _find(
            package / "workers/rollout/vllm_rollout/vllm_rollout_spmd.py", r"hasattr\(SamplingParams\(\)"
        )
        text = (
            f"rollout.n={n}: verl {config.version} copies n into vLLM's SamplingParams, so one "
            "generate() call returns n samples per prompt, batched inside the engine; the trainer "
            "repeats the batch n times after generation"
        )
    if where:
        evidence.append(Evidence(name="rollout.n mechanism", value=where, source="the installed verl's code"))
    findings = [Finding(status="pass", message=text + per_step)]
    caching, _ = r.value(f"{ROLLOUT}.enable_prefix_caching")
    if era2 and n > 1 and caching is False:
        findings.append(
            Finding(
                status="warn",
                message=f"rollout.n={n} with enable_prefix_caching=False: each of the n requests "
                "recomputes the prompt's prefill",
                remedy=f"keep {ROLLOUT}.enable_prefix_caching=True (the default) when n > 1",
            )
        )
    return findings


def _find(file: Path, pattern: str) -> str | None:
    """`path:line: text` of the first line matching pattern (evidence from verl's code)."""
    try:
        lines = file.read_text(encoding="utf-8").splitlines()
    except OSError:
        return None
    for number, line in enumerate(lines, 1):
        if re.search(pattern, line):
            return f"{file}:{number}: {line.strip()}"
    return None


def _largest_divisor(number: int, at_most: int) -> int:
    return max(d for d in range(1, min(number, at_most) + 1) if number % d == 0)


def _ints(*values: Any) -> bool:
    return all(isinstance(v, int) and not isinstance(v, bool) for v in values)
