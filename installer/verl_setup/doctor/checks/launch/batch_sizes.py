"""verl's batch-size asserts (verl/utils/config.py, ray_trainer.py, fsdp_workers.py), checked
before launch in the order verl runs them."""

from __future__ import annotations

from verl_setup.doctor.checks.launch.reader import ACTOR, ROLLOUT, Note, ints
from verl_setup.doctor.probes.launch_command import Resolver
from verl_setup.doctor.result import Finding


def batch_rules(r: Resolver, note: Note, n_gpus: int) -> list[Finding]:
    """verl's own asserts, in the order verl runs them."""
    findings = []
    train = note("data.train_batch_size")
    n = note(f"{ROLLOUT}.n")
    mini = note(f"{ACTOR}.ppo_mini_batch_size")
    micro = note(f"{ACTOR}.ppo_micro_batch_size")
    micro_gpu = note(f"{ACTOR}.ppo_micro_batch_size_per_gpu")
    sp = note(f"{ACTOR}.ulysses_sequence_parallel_size")
    sp = sp if ints(sp) and sp > 0 else 1
    if ints(train, n) and n_gpus > 0 and (train * n) % n_gpus:
        findings.append(
            Finding(
                status="fail",
                message=f"data.train_batch_size x rollout.n = {train * n} is not divisible by "
                f"nnodes x n_gpus_per_node = {n_gpus} (verl: real_train_batch_size must be divisible)",
                remedy=f"make train_batch_size x n a multiple of {n_gpus}",
            )
        )
    if ints(train, mini) and train < mini:
        findings.append(
            Finding(
                status="fail",
                message=f"data.train_batch_size={train} < actor.ppo_mini_batch_size={mini} "
                "(verl: train_batch_size must be >= ppo_mini_batch_size)",
                remedy=f"lower ppo_mini_batch_size to at most {train}",
            )
        )
    if ints(mini, n) and n_gpus // sp > 0:
        normalized = mini * n // (n_gpus // sp)
        if normalized <= 0:
            findings.append(
                Finding(
                    status="fail",
                    message=f"ppo_mini_batch_size x n / (GPUs / sp) = {normalized}: verl asserts it is > 0",
                    remedy=f"raise ppo_mini_batch_size to at least {(n_gpus // sp + n - 1) // n}",
                )
            )
        elif ints(micro_gpu) and micro_gpu > 0 and normalized % micro_gpu:
            findings.append(
                Finding(
                    status="fail",
                    message=f"per-GPU mini-batch {normalized} (ppo_mini_batch_size {mini} x n {n} / "
                    f"{n_gpus // sp} GPUs) is not divisible by ppo_micro_batch_size_per_gpu={micro_gpu}",
                    remedy=f"pick ppo_micro_batch_size_per_gpu dividing {normalized} (for example "
                    f"{largest_divisor(normalized, micro_gpu)})",
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


def largest_divisor(number: int, at_most: int) -> int:
    return max(d for d in range(1, min(number, at_most) + 1) if number % d == 0)
