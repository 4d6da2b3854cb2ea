"""Check `fit`: will a launch's training step fit each GPU? The planner (plan.py) estimates every
phase from the launch (verl's Hydra config, composed as doctor composes it), the model folder's
config.json and the GPUs; it names the largest term and ranks the smallest changes that fit, as
verl overrides. Every figure is an estimate and prints its formula."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from verl_setup.doctor.checks.memory.changes import Change, rank
from verl_setup.doctor.checks.memory.plan import RAY_KILL_AT, Estimate, estimate, gib
from verl_setup.doctor.checks.memory.setup import setup_from
from verl_setup.doctor.checks.memory.shape import shape_of
from verl_setup.doctor.probes.launch_command import Resolver, hydra_value
from verl_setup.doctor.probes.model_files import read_model
from verl_setup.doctor.probes.verl_config import MISSING
from verl_setup.doctor.result import CheckResult, Evidence, Finding, fold, skip

if TYPE_CHECKING:  # only annotations: diagnose's OOM verdict imports this without doctor's context
    from verl_setup.doctor.context import Context

ID = "fit"


def _getter(ctx: Context) -> Any:
    launch = ctx.launch
    assert launch is not None  # noqa: S101  # checked by the caller
    config, _ = ctx.verl_config

    def get(key: str) -> Any:
        if config is not None:
            value, _ = Resolver(launch, config, ctx.env).value(key)
            return None if value is MISSING else value
        given = launch.override(key)
        return hydra_value(given.value) if given is not None and given.value else None

    return get


def check_fit(ctx: Context) -> CheckResult:
    """The planner's verdict for the launch on this host's (or the host file's) GPUs."""
    if ctx.launch is None:
        return skip(
            ID, "no launch command given (doctor --check fit -- python3 -m verl.trainer.main_ppo ...)"
        )
    get = _getter(ctx)
    path = get("actor_rollout_ref.model.path")
    model = read_model(Path(str(path)).expanduser()) if path else None
    shape = shape_of(model.config) if model is not None else None
    if shape is None:
        return skip(
            ID,
            f"no readable config.json in actor_rollout_ref.model.path ({path}): the planner counts the "
            "parameters from it; download the model first or point the path at a local copy",
        )
    totals = [g.memory_total_mib for g in ctx.facts.gpus if g.memory_total_mib]
    if not totals:
        return skip(
            ID,
            "no GPU here to compare with: pass a saved `verl-setup detect --json` of the training host "
            "with --host",
        )
    result = estimate(setup_from(get, shape, gpu_bytes=min(totals) * 2**20, gpus_per_node=len(totals)))
    return report(result, source=f"{model.path if model else path}/config.json and the launch")


def evidence_of(e: Estimate, source: str) -> list[Evidence]:
    """The peak phase term by term with formulas, the other phases' totals, and the host side."""
    s, peak = e.setup, e.peak
    out = [
        Evidence(
            name="model",
            value=f"{s.shape.params / 1e9:.2f}B parameters ({s.shape.layers} layers, "
            f"hidden {s.shape.hidden}, vocab {s.shape.vocab})",
            source=source,
        ),
        Evidence(
            name="GPUs",
            value=f"{s.gpus_per_node} x {gib(s.gpu_bytes)} per node, {s.nnodes} node(s); {s.strategy}",
            source="the launch and the GPUs",
        ),
    ]
    out += [
        Evidence(name=f"{peak.name}: {t.name}", value=f"{gib(t.bytes)} = {t.formula}", source="estimate")
        for t in sorted(peak.terms, key=lambda t: -t.bytes)
    ]
    out += [
        Evidence(
            name=f"phase {p.name}", value=f"{gib(p.total)} per GPU", source="estimate (sum of its terms)"
        )
        for p in e.phases
    ]
    if e.host_terms:
        out.append(
            Evidence(
                name="host memory per node",
                value=f"{gib(e.host_total)} = "
                + " + ".join(f"{t.name} {gib(t.bytes)}" for t in e.host_terms),
                source="estimate; " + "; ".join(t.formula for t in e.host_terms),
            )
        )
    return out


def changes_text(changes: list[Change]) -> str:
    """The ranked changes as one remedy, each with its overrides and the estimate it gives."""
    if not changes:
        return (
            "no single change or combination of offload, checkpointing, a smaller reservation or more GPUs "
            "fits"
        )
    return "smallest changes that fit (estimates): " + "; ".join(
        f"({i}) {c.effect}: {' '.join(c.overrides)} -> {c.result.peak.name} {gib(c.result.peak.total)}"
        for i, c in enumerate(changes, 1)
    )


def report(e: Estimate, *, source: str) -> CheckResult:
    """The check's result for one estimate."""
    evidence = evidence_of(e, source)
    peak, dominant = e.peak, e.peak.dominant
    findings: list[Finding] = []
    verdict = e.verdict
    resident = sum(t.bytes for t in peak.terms if "(resident)" in t.name)
    beside = (
        f"; the other roles' state resident beside it adds {gib(resident)} (offload moves it to the host)"
        if resident > dominant.bytes
        else ""
    )
    if verdict == "does-not-fit":
        findings.append(
            Finding(
                status="fail",
                message=f"estimate: the {peak.name} phase needs {gib(peak.total)} per GPU, more than the "
                f"{gib(e.limit)} a {gib(e.setup.gpu_bytes)} GPU offers; the largest term is {dominant.name} "
                f"({gib(dominant.bytes)} = {dominant.formula}){beside}",
                remedy=changes_text(rank(e.setup)),
            )
        )
    elif verdict == "fits-if-shorter":
        findings.append(
            Finding(
                status="warn",
                message=f"estimate: at the maximum lengths the {peak.name} phase needs {gib(peak.total)} of "
                f"{gib(e.limit)}; with use_remove_padding a micro-batch holds its real tokens, and it fits "
                f"up to about {e.tokens_that_fit()} tokens per micro-batch",
                remedy=changes_text(rank(e.setup)),
            )
        )
    host = e.setup.host_bytes
    if host and e.host_total > host * RAY_KILL_AT:
        findings.append(
            Finding(
                status="warn",
                message=f"estimate: offloaded state and sleeping engines take {gib(e.host_total)} of host "
                f"memory per node, more than {RAY_KILL_AT} of {gib(host)} where Ray's memory monitor kills",
                remedy="offload less, or use nodes with more memory",
            )
        )
    ok = f"fits: the {peak.name} phase needs about {gib(peak.total)} of {gib(e.limit)} per GPU (estimate)"
    return fold(ID, findings, evidence, ok=ok)
