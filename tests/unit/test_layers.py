"""The package's import graph: no cycles, and no import from a lower layer up to a higher one.

Only imports that run count (an `if TYPE_CHECKING:` block names types, it loads nothing).
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "installer" / "verl_setup"

# Lowest first. A module may import its own layer and any layer below it.
LAYERS = (
    ("verl_setup", "verl_setup.errors", "verl_setup.util", "verl_setup.output", "verl_setup.scripts"),
    ("verl_setup.matrix",),
    ("verl_setup.host",),
    ("verl_setup.plan",),
    ("verl_setup.environment",),
    ("verl_setup.render",),
    ("verl_setup.doctor",),
    ("verl_setup.maintenance",),  # keeps the matrix true; uses environment/, nothing below uses it
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


def runtime_imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
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


def graph() -> dict[str, set[str]]:
    return {module_name(p): runtime_imports(p) for p in PACKAGE.rglob("*.py")}


def test_no_module_imports_from_a_higher_layer() -> None:
    upward = [
        f"{source} (layer {layer(source)}) imports {target} (layer {layer(target)})"
        for source, targets in sorted(graph().items())
        for target in sorted(targets)
        if layer(target) > layer(source)
    ]
    assert upward == []


def test_the_import_graph_has_no_cycle() -> None:
    edges = graph()
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


def test_no_module_is_over_400_lines() -> None:
    """A module that long holds more than one idea: split it along a seam it has."""
    long = {
        str(p.relative_to(PACKAGE)): n
        for p in PACKAGE.rglob("*.py")
        if (n := len(p.read_text().splitlines())) > 400
    }
    assert long == {}
