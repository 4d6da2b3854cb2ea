"""The user's packages resolved in ONE `uv pip compile` together with the row: the row's pins as
constraints (row_constraints: a list other pins can join), the user's requirements added. A
conflict is refused in one line, before anything changes, naming the user's requirement, the row
pin that blocks it with the row's evidence, and the nearest row whose pins accept it (exit 4)."""

from __future__ import annotations

import re
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from verl_setup.errors import InstallError
from verl_setup.matrix.schema import Row
from verl_setup.plan.select import Plan
from verl_setup.plan.steps import Choice, Recipe
from verl_setup.plan.user_packages import UserPackages, UserRequirement
from verl_setup.plan.user_recipe import STEP, row_constraints
from verl_setup.util.bounded import one_line

COMPILE_TIMEOUT_S = 900.0
_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?==(\S+)")
_DIRECT = re.compile(r"^(?:-e\s+)?(?:([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?\s+@\s+)?(\S+://\S+)")


@dataclass(frozen=True, kw_only=True)
class Resolved:
    """What one user package resolved to: a version, or the direct reference it stays."""

    requirement: UserRequirement
    version: str | None
    url: str | None = None

    def line(self) -> str:
        """One line of `plan`: the package, what it resolved to, where it was asked."""
        req = self.requirement
        got = self.version or self.url
        verl = " (replaces the row's verl)" if req.name == "verl" else ""
        to = f" -> {req.name} {got}" if got else " (--explain resolves it with the row)"
        return f"           with {req.shown()}{to}{verl} ({req.origin})"

    def to_json(self) -> dict[str, object]:
        """As plan --json and the manifest give it."""
        return {**self.requirement.to_json(), "resolved": self.version or self.url}


def row_pins(row: Row) -> dict[str, str]:
    """Every exact pin of the row (verl, the engine, torch, the packages), by canonical name."""
    pins = {"verl": row.verl.version, canonicalize_name("torch"): row.torch.version}
    if row.engine.name != "none" and row.engine.version:
        pins[canonicalize_name(row.engine.name)] = row.engine.version
    pins.update({canonicalize_name(n): v for n, v in row.packages.items()})
    return pins


def direct_conflicts(plan: Plan, recipe: Recipe) -> None:
    """A user requirement on a package the row pins, which the pin does not satisfy: refused with
    no resolve at all (InstallError, one line)."""
    pins = row_pins(plan.row)
    for req in recipe.user.added:
        pin = pins.get(req.name)
        if (
            req.kind != "index"
            or pin is None
            or Requirement(req.text).specifier.contains(pin, prereleases=True)
        ):
            continue
        raise InstallError(_refusal(plan, req, req.name, pin))


def _refusal(plan: Plan, req: UserRequirement, name: str, pin: str) -> str:
    row = plan.row
    evidence = row.evidence.get(name) or next(
        (v for k, v in row.evidence.items() if canonicalize_name(k) == name), "no evidence recorded"
    )
    nearest = nearest_row(plan, req)
    where = (
        f"; row {nearest[0]} pins {name}=={nearest[1]}, which it accepts"
        if nearest
        else "; no row accepts it"
    )
    return (
        f"{req.shown()} ({req.origin}) conflicts with row {row.id}'s pin {name}=={pin} "
        f"(evidence: {one_line(evidence)[:240]}){where}; nothing was changed"
    )


def nearest_row(plan: Plan, req: UserRequirement) -> tuple[str, str] | None:
    """The first row, fitting rows first, in the plan's order, whose pin of the package accepts `req`."""
    spec = Requirement(req.text).specifier
    fitting = [r.id for r in plan.rejected if r.reasons and r.reasons[0].startswith("fits, but")]
    order = fitting + [r.id for r in plan.rejected if r.id not in fitting]
    rows = {r.id: r for r in plan.matrix.rows}
    for row_id in order:
        pin = row_pins(rows[row_id]).get(req.name) if row_id in rows else None
        if pin is not None and spec.contains(pin, prereleases=True):
            return row_id, pin
    return None


def resolve_together(plan: Plan, recipe: Recipe, *, uv: str, env: Mapping[str, str]) -> list[Resolved]:
    """ONE `uv pip compile` of the row with the user's packages, the row's pins held as constraints;
    what each user package resolved to. InstallError (one line) on a conflict."""
    return resolve_with_closure(plan, recipe, uv=uv, env=env)[0]


def resolve_with_closure(
    plan: Plan, recipe: Recipe, *, uv: str, env: Mapping[str, str]
) -> tuple[list[Resolved], dict[str, str]]:
    """resolve_together, and every pin of the whole resolution. The row's closure goes in as uv's
    preferences (the pins already in its output file): uv keeps each closure version unless a
    user's package needs another, so the closure moves only where the user's packages make it."""
    from verl_setup.environment.user_lock import requirement_lines  # noqa: PLC0415
    from verl_setup.environment.uv import compile_command, uv_error, write_inputs  # noqa: PLC0415
    from verl_setup.util.runner import ProgramError, run  # noqa: PLC0415

    direct_conflicts(plan, recipe)
    step = recipe.step(STEP) or recipe.step("verl")
    if step is None or not recipe.user.requirements:
        return [], {}
    with tempfile.TemporaryDirectory(prefix="verl-setup-with-") as tmp:
        _, overrides = write_inputs(plan.row, Path(tmp), requirement_lines(step.requirements))
        constraints = Path(tmp) / "constraints.txt"
        constraints.write_text("\n".join(row_constraints(recipe)) + "\n", encoding="utf-8")
        argv = compile_command(
            uv, row=plan.row, matrix=plan.matrix, python=plan.python, requirements=Path("requirements.in"),
            overrides=None if overrides is None else Path(overrides.name),
        )  # fmt: skip
        argv = [*without_binary_only(argv), "--constraint", constraints.name]
        output = Path(tmp) / "resolved.txt"
        output.write_text("".join(f"{line}\n" for line in recipe.constraints), encoding="utf-8")
        argv += ["--output-file", output.name]
        try:
            out = run(argv, timeout=COMPILE_TIMEOUT_S, env=env, cwd=tmp)
            text = output.read_text(encoding="utf-8") if out.returncode == 0 else ""
        except (ProgramError, OSError) as exc:
            raise InstallError(f"uv pip compile: {exc}") from exc
    if out.returncode != 0:
        raise InstallError(_uv_refusal(plan, recipe, out.stderr, uv_error(out.stderr)))
    pins = {
        str(canonicalize_name(m[1])): m[2] for m in (_PIN.match(ln.strip()) for ln in text.splitlines()) if m
    }
    return _resolved(recipe, text), pins


def without_binary_only(argv: list[str]) -> list[str]:
    """uv's default (wheel or sdist) for a resolve that holds the user's packages."""
    out: list[str] = []
    skip = 0
    for i, arg in enumerate(argv):
        if skip:
            skip -= 1
            continue
        if arg in ("--only-binary", "--no-binary") and i + 1 < len(argv):
            skip = 1
            continue
        out.append(arg)
    return out


def _uv_refusal(plan: Plan, recipe: Recipe, stderr: str, message: str) -> str:
    """uv's conflict in one line: the user's requirement it names, and the row pins it fights."""
    because = next((ln.strip() for ln in stderr.splitlines() if "Because" in ln or "because" in ln), message)
    text = " ".join(stderr.split()).lower()
    mine = [r for r in recipe.user.requirements if r.name in text or r.name.replace("-", "_") in text]
    pins = row_pins(plan.row)
    fights = [f"{n}=={v}" for n, v in pins.items() if re.search(rf"\b{re.escape(n)}\b", text) and n != "verl"]
    who = ", ".join(f"{r.shown()} ({r.origin})" for r in (mine or recipe.user.requirements))
    against = (
        f" against row {plan.row.id}'s pin {', '.join(fights[:3])}" if fights else f" with row {plan.row.id}"
    )
    evidence, nearest = "", ""
    if fights:
        name = fights[0].split("==")[0]
        found = next((v for k, v in plan.row.evidence.items() if canonicalize_name(k) == name), None)
        evidence = f" (evidence: {one_line(found)[:200]})" if found else ""
        # uv names the bound the user's package puts on the pinned one: a row whose pin meets it.
        bound = re.search(rf"depends on {re.escape(name)}([<>=!~][^\s,;]*(?:,[<>=!~][^\s,;]*)*)", because)
        row = None
        if bound and mine:
            wanted = UserRequirement(text=f"{name}{bound[1]}", name=name, origin="", kind="index")
            row = nearest_row(plan, wanted)
        nearest = f"; row {row[0]} pins {name}=={row[1]}, which it accepts" if row else ""
    cause = one_line(because)[:400].removeprefix("cause: ")
    return f"{who} does not resolve{against}{evidence}: {cause}{nearest}; nothing was changed"


def _resolved(recipe: Recipe, output: str) -> list[Resolved]:
    found: dict[str, tuple[str | None, str | None]] = {}
    for line in output.splitlines():
        pin = _PIN.match(line.strip())
        if pin:
            found[canonicalize_name(pin[1])] = (pin[2], None)
            continue
        direct = _DIRECT.match(line.strip())
        if direct and direct[1]:
            found[canonicalize_name(direct[1])] = (None, direct[2])
    out = []
    for req in recipe.user.requirements:
        version, url = found.get(req.name, (None, None))
        if req.kind == "path" and req.path is not None:
            url = f"{req.path} (editable)" if req.editable else str(req.path)
        out.append(Resolved(requirement=req, version=version, url=url))
    return out


def plan_user_packages(plan: Plan, user: UserPackages, *, env: Mapping[str, str]) -> list[Resolved]:
    """What `plan` says of the user's packages: each resolved with the row (the packages built
    against torch left aside: they are the outlook's to report, and none pins for the user)."""
    from verl_setup.plan.recipe import build_recipe  # noqa: PLC0415
    from verl_setup.plan.user_recipe import with_user_packages  # noqa: PLC0415
    from verl_setup.util.uvbin import find_uv  # noqa: PLC0415

    facts = plan.matrix.rows_file.torch_extensions
    aside: dict[str, Choice] = {n: "without" for n in facts if n in plan.row.packages}
    recipe = with_user_packages(build_recipe(plan, extensions=aside, env=env), user)
    return resolve_together(plan, recipe, uv=find_uv(), env=env)
