"""The package's import graph: no cycles, and no import from a lower layer up to a higher one.

Only imports that run count (an `if TYPE_CHECKING:` block names types, it loads nothing).
"""

from __future__ import annotations

import ast
import os
import time
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "installer" / "verl_setup"

# Lowest first. A module may import its own layer and any layer below it.
LAYERS = (
    ("verl_setup", "verl_setup.errors", "verl_setup.util", "verl_setup.output", "verl_setup.scripts"),
    ("verl_setup.matrix",),
    ("verl_setup.host",),
    ("verl_setup.plan",),
    ("verl_setup.environment",),
    ("verl_setup.cluster",),  # every node at once: Ray tasks and Slurm steps over environment/
    ("verl_setup.render",),
    ("verl_setup.image",),  # renders the docker target first, then builds it
    ("verl_setup.doctor",),
    ("verl_setup.diagnose",),  # reads a failed run; uses doctor's NCCL address classes
    ("verl_setup.smoke",),  # trains in an installed env; diagnoses its own failed run
    ("verl_setup.maintenance",),  # keeps the matrix true; uses environment/, nothing below uses it
    ("verl_setup.wheelbuild",),  # builds the wheelhouse; uses environment/ and maintenance's index client
    ("verl_setup.commands",),
    ("verl_setup.cli", "verl_setup.__main__"),
)


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def layer(module: str) -> int:
    best, found = -1, 0
    for index, prefixes in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best:
                best, found = len(prefix), index
    return found


def runtime_imports(path: Path, *, types: bool = False) -> set[str]:
    tree = ast.parse(path.read_text())
    skip: set[int] = set()
    for node in ast.walk(tree):
        if not types and isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skip.update(id(n) for n in ast.walk(node))
    found = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("verl_setup"):
            for alias in node.names:
                candidate = f"{node.module}.{alias.name}"
                found.add(
                    candidate
                    if (PACKAGE.parent / candidate.replace(".", "/")).exists()
                    or (PACKAGE.parent / (candidate.replace(".", "/") + ".py")).exists()
                    else node.module
                )
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("verl_setup"))
    return found


def graph(*, types: bool = False) -> dict[str, set[str]]:
    return {module_name(p): runtime_imports(p, types=types) for p in PACKAGE.rglob("*.py")}


def test_no_module_imports_from_a_higher_layer() -> None:
    upward = [
        f"{source} (layer {layer(source)}) imports {target} (layer {layer(target)})"
        for source, targets in sorted(graph().items())
        for target in sorted(targets)
        if layer(target) > layer(source)
    ]
    assert upward == []


@pytest.mark.parametrize("types", [False, True], ids=["runtime", "with-type-only-imports"])
def test_the_import_graph_has_no_cycle(types: bool) -> None:
    edges = graph(types=types)
    state: dict[str, int] = {}
    cycles: list[list[str]] = []

    def visit(node: str, stack: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(edges.get(node, ())):
            if nxt not in edges:
                continue
            if state.get(nxt) == 1:
                cycles.append([*stack[stack.index(nxt) :], nxt] if nxt in stack else [node, nxt])
            elif nxt not in state:
                visit(nxt, [*stack, nxt])
        state[node] = 2

    for node in sorted(edges):
        if node not in state:
            visit(node, [node])
    assert cycles == []


def test_the_package_root_holds_at_most_five_modules() -> None:
    root = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(root) <= 5, root


def test_the_vocabularies_are_the_tables_they_name() -> None:
    from verl_setup.doctor.run import CHECKS  # noqa: PLC0415
    from verl_setup.render.templates import TARGETS  # noqa: PLC0415
    from verl_setup.util.vocab import CHECK_IDS, RENDER_TARGETS  # noqa: PLC0415

    assert tuple(TARGETS) == RENDER_TARGETS
    assert tuple(CHECKS) == CHECK_IDS


def test_no_module_beside_a_child_script_shadows_what_the_child_imports() -> None:
    """ray_child.py runs as a script, so its folder is first on its sys.path: no ray.py there."""
    for child in PACKAGE.rglob("*_child.py"):
        assert not (child.parent / "ray.py").exists(), child
        assert not (child.parent / "pynvml.py").exists(), child


def test_no_yaml_call_outside_the_bounded_reader() -> None:
    """util/yamlread is the package's one door to YAML: it caps the size, refuses FIFOs and
    aliases (an alias bomb) and reports lines; any other `yaml.` call would bypass that."""
    package = PACKAGE
    offenders = []
    for path in sorted(package.rglob("*.py")):
        if path == package / "util" / "yamlread.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            imported = isinstance(node, ast.Import) and any(
                a.name.split(".")[0] == "yaml" for a in node.names
            )
            imported |= isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "yaml"
            called = (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id == "yaml"
            )
            if imported or called:
                offenders.append(f"{path.relative_to(package)}:{getattr(node, 'lineno', 0)}")
    assert offenders == []


@pytest.mark.parametrize("kind", ["fifo", "alias-bomb"])
def test_doctor_reads_a_runtime_env_and_a_verl_config_through_the_bounded_reader(
    tmp_path: Path, kind: str
) -> None:
    from verl_setup.doctor.probes.launch_command import parse_launch  # noqa: PLC0415
    from verl_setup.doctor.probes.verl_config import load_config  # noqa: PLC0415
    from verl_setup.doctor.probes.working_dir import find_working_dir  # noqa: PLC0415

    for name in ("env.yaml", "ppo_trainer.yaml"):
        if kind == "fifo":
            os.mkfifo(tmp_path / name)  # a plain open() of it blocks until a writer comes: forever
        else:
            bomb = ["a: &a [x, x, x, x, x, x, x, x, x]"]
            bomb += [
                f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)}" + f", *{chr(97 + i)}" * 8 + "]"
                for i in range(9)
            ]
            (tmp_path / name).write_text("\n".join(bomb) + "\n")
    launch = parse_launch(["ray", "job", "submit", "--runtime-env", "env.yaml", "--", "python3", "-m", "x"])
    started = time.monotonic()
    assert find_working_dir(launch, tmp_path) is None
    assert load_config(tmp_path, "ppo_trainer", "0.9.1") is None
    assert time.monotonic() - started < 5


def test_no_module_is_over_400_lines() -> None:
    """A module that long holds more than one idea: split it along a seam it has."""
    long = {
        str(p.relative_to(PACKAGE)): n
        for p in PACKAGE.rglob("*.py")
        if (n := len(p.read_text().splitlines())) > 400
    }
    assert long == {}


def test_commands_run_no_program_and_read_no_manifest() -> None:
    """commands/ is flags -> typed options -> one use-case call -> print: the use cases (not the
    commands) run programs (util.runner, subprocess), pick uv (util.uvbin), read an environment's
    manifest and look at the process environment (each command is handed `env`)."""
    banned_modules = ("subprocess", "verl_setup.util.runner", "verl_setup.util.uvbin")
    banned_names = ("MANIFEST", "from_manifest", "find_uv")
    offenders = []
    for path in sorted((PACKAGE / "commands").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            where = f"{path.relative_to(PACKAGE)}:{getattr(node, 'lineno', 0)}"
            if isinstance(node, ast.Import) and any(a.name in banned_modules for a in node.names):
                offenders.append(where)
            if isinstance(node, ast.ImportFrom) and (node.module or "") in banned_modules:
                offenders.append(where)
            if isinstance(node, ast.ImportFrom) and any(a.name in banned_names for a in node.names):
                offenders.append(where)
            if isinstance(node, ast.Attribute) and ast.unparse(node) == "os.environ":
                offenders.append(where)
    assert offenders == []


def test_no_two_public_classes_share_a_name() -> None:
    """One name per concept: two classes named alike are either one concept (share one) or two
    (name them for how they differ: verify's Mismatch, proof's ProofStep, diagnose's LogFinding)."""
    where: dict[str, list[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                where.setdefault(node.name, []).append(str(path.relative_to(PACKAGE)))
    assert {name: paths for name, paths in where.items() if len(paths) > 1} == {}
