"""Check `engine-env`: engine variables set in this shell that the installed (else the planned)
engine ignores or rejects, from matrices/engine_env.yaml (verl#940: VLLM_ATTENTION_BACKEND=XFORMERS
left over from verl's vLLM 0.6/0.7 examples, with vLLM 0.8's V1 engine)."""

from __future__ import annotations

from verl_setup.doctor.context import Context
from verl_setup.doctor.result import CheckResult, Evidence, Finding, fold, skip
from verl_setup.matrix.engine_env import load_engine_env
from verl_setup.util.vocab import ROLLOUT_ENGINES

ID = "engine-env"


def engine_versions(ctx: Context) -> tuple[dict[str, str], str]:
    """engine -> version: installed in the target env, else the row planned for this host."""
    target, _ = ctx.target
    if target is not None:
        found: dict[str, str] = {}
        for name in ROLLOUT_ENGINES:
            version = target.dists.get(name)
            if version is not None:
                found[name] = version
        if found:
            return found, f"installed in {target.prefix}"
    row, why = ctx.row
    if row is not None and row.engine.name != "none" and row.engine.version is not None:
        return {row.engine.name: row.engine.version}, f"row {row.id} ({why})"
    return {}, ""


def check_engine_env(ctx: Context) -> CheckResult:
    """Every variable of the table that is set here, against the engine's version."""
    table = load_engine_env()
    present = [
        (v, ctx.env[v.name]) for v in table.variables if v.name in ctx.env and v.matches(ctx.env[v.name])
    ]
    if not present:
        return CheckResult(id=ID, status="pass", summary="no engine variable of the table is set here")
    engines, source = engine_versions(ctx)
    if not engines:
        return skip(ID, "no rollout engine installed or planned to check the variables against")
    evidence = [Evidence(name=name, value=version, source=source) for name, version in engines.items()]
    findings = []
    for entry, value in present:
        version = engines.get(entry.engine)
        if version is None:
            continue
        cited = ", ".join(table.sources[s].split(" ", 1)[0] for s in entry.sources)
        verdict = entry.verdict(version)
        setting = f"{entry.name}={value}"
        evidence.append(Evidence(name=entry.name, value=value, source="this shell's environment"))
        if verdict == "rejects":
            findings.append(
                Finding(
                    status="warn",
                    message=f"{setting} does not work with {entry.engine} {version}: {entry.effect} "
                    f"({cited})",
                    remedy=entry.remedy,
                )
            )
        elif verdict == "not verified":
            findings.append(
                Finding(
                    status="pass",
                    message=f"{setting} with {entry.engine} {version}: not verified either way (the table "
                    f"knows {entry.accepts or '-'} accepts it, {entry.rejects or '-'} does not)",
                )
            )
    return fold(ID, findings, evidence, ok="the engine variables set here suit the engine")
