"""Human-readable text for detect, plan and matrix output (JSON is printed by the CLI)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # types only: `detect` imports no matrix and no planning
    from verl_setup.host.facts import HostFacts
    from verl_setup.matrix.load import Matrix
    from verl_setup.matrix.schema import Row
    from verl_setup.plan.select import Plan


def host_text(facts: HostFacts) -> str:
    """`verl-setup detect` without --json."""
    o = facts.os
    lines = [
        f"os         {o.distro or '?'} {o.distro_version or ''} | kernel {o.kernel} "
        f"| glibc {o.glibc or '?'} | {o.arch}",
        f"container  {facts.container.kind} ({facts.container.evidence})",
    ]
    if facts.nvidia is None:
        lines.append("driver     none (no NVIDIA kernel driver found)")
    else:
        n = facts.nvidia
        cuda = f", CUDA {n.cuda} ({n.cuda_source})" if n.cuda else ""
        lines.append(f"driver     {n.version} ({n.source}){cuda}")
    if not facts.gpus:
        lines.append("gpus       none")
    for g in facts.gpus:
        mem = f"{g.memory_free_mib}/{g.memory_total_mib} MiB free" if g.memory_total_mib else "memory ?"
        procs = f", held by {len(g.processes)} process(es)" if g.processes else ""
        lines.append(
            f"gpu {g.index:<6} {g.name} (sm {g.compute_capability or '?'}), {mem}{procs} [{g.source}]"
        )
    lines += accelerator_lines(facts)
    for t in facts.cuda_toolkits:
        lines.append(f"cuda       {t.version or '?'} at {t.path}{' (nvcc on PATH)' if t.on_path else ''}")
    for p in facts.pythons:
        warn = f"  !! {p.mismatch}" if p.mismatch else ""
        lines.append(f"python     {p.version:<8} {p.path} [{p.source}]{warn}")
    for tool in facts.tools:
        lines.append(f"tool       {tool.name} {tool.version or '?'} at {tool.path}")
    for name, value in facts.env.items():
        lines.append(f"env        {name}={value}")
    lines += [f"note       {note}" for note in facts.notes]
    return "\n".join(lines) + "\n"


def accelerator_lines(facts: HostFacts) -> list[str]:
    """One line per Ascend/AMD family (driver, toolkit, count), then one per device."""
    lines = []
    for a in facts.accelerators:
        label = {"ascend": "Ascend NPU", "rocm": "AMD GPU (ROCm)"}[a.family]
        driver = f"driver {a.driver} ({a.driver_source})" if a.driver else "driver ?"
        kit = (
            f"{a.toolkit} {a.toolkit_version} ({a.toolkit_source})"
            if a.toolkit_version
            else f"{a.toolkit or 'toolkit'} not found"
        )
        pci = f", {a.pci_devices} on PCI" if a.pci_devices else ""
        lines.append(f"accel      {label}: {a.count} device(s){pci} | {driver} | {kit} [{a.source}]")
        for d in a.devices:
            mem = f", {d.memory_used_mib}/{d.memory_total_mib} MiB used" if d.memory_total_mib else ""
            bus = f" at {d.bus_id}" if d.bus_id else ""
            lines.append(f"  {a.family} {d.index:<4} {d.name} ({d.chip or '?'}){bus}{mem} [{d.source}]")
    return lines


def plan_text(plan: Plan, *, explain: bool, all_rows: bool = False) -> str:
    """`verl-setup plan` without --json (--explain: one screen; --all-rows: every row's reasons)."""
    from verl_setup.plan.explain import evidence_lines, fact_lines, row_lines  # noqa: PLC0415

    lines = selected_lines(plan)
    if explain:
        lines += fact_lines(plan, short)
        lines += evidence_lines(plan.row)
    lines += [f"warning    {w}" for w in plan.warnings]
    if all_rows:
        lines.append("rejected")
        for r in plan.rejected:
            lines.append(f"  {r.id}")
            lines += [f"      - {reason}" for reason in r.reasons]
        for u in plan.unfit:
            lines.append(
                f"not offered {u.engine} {', '.join(u.versions)} for verl {u.verl}: {u.reason} ({u.source})"
            )
    elif explain:
        lines += row_lines(plan)
    else:
        lines.append(f"rejected   {len(plan.rejected)} other rows (--explain says why)")
    return "\n".join(lines) + "\n"


def selected_lines(plan: Plan, suffix: str = "") -> list[str]:
    """The chosen row, its proof, what gets installed and from where."""
    row = plan.row
    engine = "no engine" if row.engine.name == "none" else f"{row.engine.name} {row.engine.version}"
    cuda = f"+cu{row.torch.cuda.replace('.', '')}" if row.torch.cuda else ""
    _, proof = plan.matrix.proof_of(row)
    lines = [
        f"selected   {row.id}: verl {row.verl.version}, {engine}, "
        f"torch {row.torch.version}{cuda}, Python {plan.python} (policy {plan.policy}){suffix}",
        f"proof      {proof}",
        "install    " + " ".join(row.requirements()),
        f"closure    {plan.closure.words()}",
    ]
    if plan.index_url:
        lines.append(f"index      torch from {plan.index_url}")
    return lines


def short(value: object) -> str:
    if isinstance(value, list):
        return ", ".join(f"{g['name']} (sm {g['compute_capability']})" for g in value) or "none"
    return "-" if value is None else str(value)


def matrix_list_text(matrix: Matrix) -> str:
    """One line per row."""
    lines = [
        f"{'id':<28} {'proof':<42} {'verl':<7} {'engine':<20} {'backend':<9} {'torch':<14} {'cuda':<5} "
        f"{'arch':<8} python"
    ]
    for r in matrix.rows:
        engine = "none" if r.engine.name == "none" else f"{r.engine.name} {r.engine.version}"
        python = f"{','.join(r.python.supported)} ({r.python.recommended})"
        lines.append(
            f"{r.id:<28} {matrix.proof_words(r):<42} {r.verl.version:<7} {engine:<20} {r.backend:<9} "
            f"{r.torch.version:<14} {r.torch.cuda or '-':<5} {','.join(r.requires.arch):<8} {python}"
        )
    if not any("gpu" in p.steps for p in matrix.proof.rows.values()):
        lines.append(
            "proof levels: resolves < installs < imports < gpu; no row has a run on a GPU host recorded; "
            "(without NAME): proven with that package built against torch left out, not the whole stack"
        )
    return "\n".join(lines) + "\n"


def row_text(row: Row, matrix: Matrix) -> str:
    """One row with requirements and evidence."""
    req = row.requires
    lines = [
        f"{row.id} (line {row.line} of {matrix.path})",
        f"proof: {matrix.proof_of(row)[1]}",
        "requirements:",
    ]
    lines += [f"  {line}" for line in row.requirements()]
    if row.overrides:
        lines.append("overrides: " + "; ".join(row.overrides))
    index = matrix.index_url(row)
    lines.append(f"torch index: {index or 'default (your uv index configuration)'}")
    lines.append(f"python: {', '.join(row.python.supported)} (install {row.python.recommended})")
    lines.append(f"platform: {', '.join(req.arch)}, glibc >= {req.glibc}")
    if req.gpu and req.driver and req.compute_capability:
        lines.append(
            f"driver: >= {req.driver.compat} (compat), >= {req.driver.strict} (strict); CUDA {req.cuda}"
        )
        lines.append(f"compute capability: {req.compute_capability.min} .. {req.compute_capability.max}")
    else:
        lines.append("gpu: not needed")
    lines.append("evidence:")
    lines += [f"  {key}: {text}" for key, text in row.evidence.items()]
    lines += [f"known issue: {i.summary} ({i.source})" for i in row.known_issues]
    if row.notes:
        lines.append(f"notes: {row.notes}")
    lines.append(f"hash: {row.content_hash()}")
    return "\n".join(lines) + "\n"
