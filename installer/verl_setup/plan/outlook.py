"""What install will do, per package built against torch, said before anything runs (`plan`):
a wheel from which source, a build, or a refusal (and why). Data only: no index is read."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from verl_setup.plan.recipe import build_recipe
from verl_setup.plan.select import Plan
from verl_setup.plan.steps import Choice, ExtensionRequests
from verl_setup.util.bounded import one_line


def outlook(
    plan: Plan, *, requests: ExtensionRequests, wheel_sources: tuple[str, ...], env: Mapping[str, str]
) -> list[dict[str, Any]]:
    """One entry per package the row builds against torch: name, version, mode, source, reason."""
    from verl_setup.errors import InstallError  # noqa: PLC0415

    facts = plan.matrix.rows_file.torch_extensions
    out = []
    for name in (n for n in facts if n in plan.row.packages):
        # Each package on its own: the others left out, so one refusal does not hide the rest.
        alone: dict[str, Choice] = {o: "without" for o in facts if o != name and o in plan.row.packages}
        alone[name] = requests.get(name, "auto")
        entry: dict[str, Any] = {"name": name, "version": plan.row.packages[name]}
        try:
            recipe = build_recipe(
                plan, extensions=alone, nvcc_version=plan.row.torch.cuda, wheel_sources=wheel_sources, env=env
            )
        except InstallError as exc:
            entry |= {"mode": "refuse", "source": None, "reason": one_line(str(exc))}
        else:
            ext = recipe.extension(name)
            assert ext is not None  # noqa: S101  # the row has it
            source = ext.source if ext.mode == "wheel" else None
            entry |= {"mode": ext.mode, "source": source, "reason": ext.reason}
            if ext.mode == "wheel":
                entry["sources"] = [c.source for c in ext.candidates]
                # The distribution that will land: a whole-project wheel (transformer-engine) or its own.
                entry["distribution"] = ext.distribution or name
        out.append(entry)
    return out


def outlook_lines(entries: list[dict[str, Any]]) -> list[str]:
    """The `plan` text lines for the entries."""
    lines = []
    for e in entries:
        what = {"wheel": f"wheel from {e['source']}", "build": "build", "without": "left out"}.get(
            e["mode"], "refuse"
        )
        more = f" (then {', '.join(e['sources'][1:])})" if len(e.get("sources", ())) > 1 else ""
        lines.append(f"extension  {e['name']} {e['version']}: {what}{more}: {e['reason']}")
    return lines
