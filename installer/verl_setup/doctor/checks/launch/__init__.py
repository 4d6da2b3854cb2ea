"""Check `launch`: lint the command after `--` against the installed verl's own config.

The rules are verl's own: Hydra's struct mode (a new key needs `+`), verl's batch-size asserts
(verl/utils/config.py, ray_trainer.py, fsdp_workers.py) and the engine it will import.
"""

from __future__ import annotations

from verl_setup.doctor.checks.known_issues import known_issue_findings
from verl_setup.doctor.checks.launch.data_and_model import lint_targets
from verl_setup.doctor.checks.launch.hydra_compose import lint_with_hydra
from verl_setup.doctor.checks.launch.keys import lint_keys
from verl_setup.doctor.checks.launch.reader import noter
from verl_setup.doctor.checks.launch.rollout_n import explain_rollout_n
from verl_setup.doctor.checks.launch.values import known_rollouts, lint_values
from verl_setup.doctor.context import Context
from verl_setup.doctor.probes.launch_command import Launch, Resolver
from verl_setup.doctor.result import CheckResult, Evidence, Finding, fold, skip

ID = "launch"


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
