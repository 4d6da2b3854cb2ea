"""The package's import graph: no cycles, and no import from a lower layer up to a higher one.

Only imports that run count (an `if TYPE_CHECKING:` block names types, it loads nothing).
"""

from __future__ import annotations

import ast
import os
import re
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
    ("verl_setup.deliver",),  # the rendered files into a folder, `uv lock` for the uv project
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
    """scripts/ are programs for other interpreters, not imported here: their imports of the
    package are test_scripts_import_the_package_only_where_it_is_shipped's."""
    upward = [
        f"{source} (layer {layer(source)}) imports {target} (layer {layer(target)})"
        for source, targets in sorted(graph().items())
        if not source.startswith("verl_setup.scripts.")
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


SCRIPTS_DIR = PACKAGE / "scripts"


def where(path: Path) -> str:
    return str(path.relative_to(PACKAGE)) if PACKAGE in path.parents else path.name


def python_in_strings(path: Path) -> list[str]:
    """String constants (not docstrings) that are Python programs: they parse, and import."""
    tree = ast.parse(path.read_text())
    docs = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
    }
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
            if "import " not in node.value:
                continue
            try:
                program = ast.parse(node.value)
            except (SyntaxError, ValueError):
                continue
            if any(isinstance(n, (ast.Import, ast.ImportFrom)) for n in ast.walk(program)):
                found.append(f"{where(path)}:{node.lineno}")
    return found


def dash_c_without_a_script(path: Path) -> list[str]:
    """`-c` in an argv that is not followed by a script's text from the table."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, (ast.List, ast.Tuple)):
            continue
        for i, item in enumerate(node.elts):
            if isinstance(item, ast.Constant) and item.value == "-c":
                nxt = node.elts[i + 1] if i + 1 < len(node.elts) else None
                named = isinstance(nxt, ast.Call) and ast.unparse(nxt.func) == "script_text"
                if not named:
                    found.append(f"{where(path)}:{item.lineno}")
    return found


def test_no_module_holds_a_program_for_another_interpreter() -> None:
    """Programs for other interpreters are files in scripts/, run by path or sent as that file's
    text (script_text): none is Python in a string, and none is passed to `python -c` otherwise."""
    modules = [p for p in PACKAGE.rglob("*.py") if SCRIPTS_DIR not in p.parents]
    assert [hit for p in modules for hit in python_in_strings(p)] == []
    assert [hit for p in modules for hit in dash_c_without_a_script(p)] == []


def test_the_checks_for_programs_in_strings_catch_one(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(
        '"""import this: a docstring is no program."""\n'
        'CHILD = "import json, sys\\nprint(json.dumps(sys.argv))\\n"\n'
        'ARGV = ["python", "-c", CHILD]\n'
        'OK = ["python", "-c", script_text("interpreter")]\n'
        'WORDS = "cannot import name x"\n'
    )
    assert python_in_strings(sample) == ["sample.py:2"]
    assert dash_c_without_a_script(sample) == ["sample.py:3"]


def test_every_file_in_scripts_is_in_the_table() -> None:
    from verl_setup.scripts import SCRIPTS, SHARED, SMOKE, script_path  # noqa: PLC0415

    named = {script_path(name) for name in SCRIPTS}
    assert all(p.is_file() for p in named)
    plugins = {p for p in SMOKE.rglob("*.py") if p.parent != SMOKE}  # verl's plugins, per verl minor
    files = {p for p in SCRIPTS_DIR.rglob("*.py") if p.name != "__init__.py"} - plugins
    assert files - named == {SCRIPTS_DIR / name for name in SHARED}


def test_scripts_import_the_package_only_where_it_is_shipped() -> None:
    """They run in interpreters without verl_setup (a user's venv), save those the table names;
    ray_script.py is imported as a sibling at run time, by name only for mypy."""
    from verl_setup.scripts import SCRIPTS, WITH_PACKAGE, script_path  # noqa: PLC0415

    for name in SCRIPTS:
        path = script_path(name)
        imports = runtime_imports(path)
        assert (name in WITH_PACKAGE) == bool(imports), (name, imports)


def test_no_file_in_scripts_shadows_what_a_script_imports() -> None:
    """A script run by path has its folder first on sys.path: no file there may be named as a
    module that any script imports (ray.py, json.py, torch.py ...), save the shared sibling."""
    import sys  # noqa: PLC0415

    from verl_setup.scripts import SHARED  # noqa: PLC0415

    imported: set[str] = set(sys.stdlib_module_names)
    for path in SCRIPTS_DIR.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                imported.update(a.name.split(".")[0] for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                imported.add(node.module.split(".")[0])
    stems = {p.stem for p in SCRIPTS_DIR.glob("*.py")} - {Path(n).stem for n in SHARED}
    assert stems & (imported | {"verl", "vllm", "sglang", "hydra", "pynvml", "huggingface_hub"}) == set()


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


# A machine fact read below host/ (the scripts/ run in other interpreters, without the package).
MACHINE_CALLS = ("os.cpu_count", "os.sched_getaffinity", "os.sysconf")
MACHINE_FILES = ("/proc/meminfo", "/proc/self/cgroup", "/sys/fs/cgroup")
# diagnose/verdict.py sizes its thread pool from os.cpu_count(); that line is rewritten on another
# branch (diagnose's batched scan) and moves to host.resources.online_cpus when both are in.
MACHINE_FACTS_LEFT: set[str] = set()


def reads_a_machine_fact(node: ast.AST) -> bool:
    """os.cpu_count() and its kind, a /proc or cgroup path, or an argv that runs `nvcc --version`."""
    if isinstance(node, ast.Call):
        return ast.unparse(node.func) in MACHINE_CALLS
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str) and node.value.startswith(MACHINE_FILES)
    if isinstance(node, (ast.List, ast.Tuple)):
        words = [ast.unparse(e) for e in node.elts]
        return "'--version'" in words and any("nvcc" in w for w in words)
    return False


def machine_probes(path: Path) -> list[str]:
    """Where `path` reads memory, CPUs, the cgroup or nvcc's release itself."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return sorted(
        {f"{where(path)}:{getattr(n, 'lineno', 0)}" for n in ast.walk(tree) if reads_a_machine_fact(n)},
        key=lambda hit: int(hit.rsplit(":", 1)[1]),
    )


def test_machine_facts_are_read_in_host_only() -> None:
    """host/ holds every machine fact with its source: nvcc's release, memory, cores, the affinity
    mask and the cgroup's limits are read there (host/resources.py, host/nvcc.py), nowhere else."""
    outside = [
        p
        for p in sorted(PACKAGE.rglob("*.py"))
        if PACKAGE / "host" not in p.parents
        and SCRIPTS_DIR not in p.parents
        and str(p.relative_to(PACKAGE)) not in MACHINE_FACTS_LEFT
    ]
    assert [hit for p in outside for hit in machine_probes(p)] == []


def test_the_check_for_machine_probes_catches_each_kind(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(
        '"""Reads /proc/meminfo: a docstring that names it is no read."""\n'
        "import os\n"
        "CORES = os.cpu_count()\n"
        'MEMINFO = Path("/proc/meminfo")\n'
        "RAM = os.sysconf('SC_PHYS_PAGES')\n"
        'OUT = run([nvcc, "--version"], timeout=30)\n'
        'PY = run([python, "--version"], timeout=30)\n'
    )
    assert machine_probes(sample) == ["sample.py:3", "sample.py:4", "sample.py:5", "sample.py:6"]


# `X.split(".")[:2]` (either quote, [:2] or [0:2]): util.versions.minor_of says the same and
# reads "2.11.0+cu130", "v0.9.1" and "12" alike everywhere.
MINOR_BY_HAND = re.compile(r"""split\(\s*(['"])\.\1\s*\)\s*\[\s*0?\s*:\s*2\s*\]""")


def test_no_minor_version_is_cut_by_hand() -> None:
    root = PACKAGE.parents[1]
    trees = [root / "installer", root / "bench", root / "tasks", root / "tests"]
    offenders = [
        f"{path.relative_to(root)}:{number}"
        for tree in trees
        for path in sorted(tree.rglob("*.py"))
        if path != Path(__file__).resolve()
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if MINOR_BY_HAND.search(line)
    ]
    assert offenders == []


def test_the_check_for_minors_by_hand_catches_each_form() -> None:
    forms = ['v.split(".")[:2]', "v.split('.')[:2]", 'v.split(".")[0:2]', 'v.split( "." )[ :2 ]']
    assert all(MINOR_BY_HAND.search(f) for f in forms)
    assert not any(
        MINOR_BY_HAND.search(f) for f in ['v.split(".")[:1]', 'v.split(".", 1)[0]', 'v.split("-")[:2]']
    )


# The pieces a use case assembles (plan -> recipe -> wheels -> lock; the image's engine and
# builder): a command that imports one is doing the use case's work itself. None = every name.
USE_CASE_PARTS: dict[str, frozenset[str] | None] = {
    "verl_setup.plan.recipe": frozenset({"build_recipe", "recipe_for"}),
    "verl_setup.environment.wheel_pick": frozenset({"resolve_wheels"}),
    "verl_setup.environment.lock_job": frozenset({"user_recipe", "planned_recipe"}),
    "verl_setup.environment.pylock": frozenset({"check_name"}),
    "verl_setup.environment.verify": frozenset({"verify_env"}),
    "verl_setup.cluster.install": frozenset({"check_sharing", "install_on_nodes"}),
    "verl_setup.image.engine": None,  # the Docker SDK client, build, verify inside, label, push
    "verl_setup.image.buildkit": frozenset({"choose", "build_cli"}),
    "docker": None,  # the Docker SDK itself
    # matrix check and propose (maintenance/check_job.py, maintenance/propose_job.py)
    "verl_setup.environment.uv": frozenset({"uv_and_env"}),
    "verl_setup.maintenance.check": frozenset({"check_row", "default_index", "indexes_for"}),
    "verl_setup.maintenance.source_check": frozenset({"check_source"}),
    "verl_setup.maintenance.closure_targets": frozenset({"with_targets"}),
    "verl_setup.matrix.resolved": frozenset({"record_resolved"}),
    "verl_setup.matrix.wheel_seen": frozenset({"record_seen"}),
    "verl_setup.maintenance.propose": frozenset({"Proposer"}),
    # render (deliver/render_job.py): render, `uv lock`, compare, write
    "verl_setup.render.templates": frozenset({"render", "compare", "write"}),
    "verl_setup.environment.uv_lock": None,
    # plan (doctor/plan_job.py): the outlook, the user's packages with uv, the launch's fit
    "verl_setup.plan.outlook": frozenset({"outlook"}),
    "verl_setup.environment.with_resolve": frozenset({"plan_user_packages"}),
    "verl_setup.doctor.fit_launch": frozenset({"fit_of_launch"}),
    # doctor (diagnose/doctor_job.py): the checks, then a failed Ray session for the hint
    "verl_setup.diagnose.sources": frozenset({"failed_session", "gather"}),
    "verl_setup.doctor.run": frozenset({"make_context", "run_checks"}),
    "verl_setup.diagnose.verdict": frozenset({"diagnose"}),  # diagnose/bug_report.py, diagnose_job.py
    # diagnose (diagnose/diagnose_job.py): the paths grouped into runs, each read and diagnosed
    "verl_setup.diagnose.runs": frozenset({"split_runs"}),
    # --cluster's plan (plan.make.make_cluster_plan): the cluster file, the matrix, every node's row
    "verl_setup.plan.cluster": frozenset({"plan_cluster"}),
    # the plan itself: render, docker build, wheelhouse build and install --cluster make it in
    # their use case; `plan` and `plan --cluster` are the only commands whose use case it is
    "verl_setup.plan.make": frozenset({"make_plan", "make_cluster_plan"}),
    "verl_setup.host.cluster_file": frozenset({"load_cluster"}),
    # wheelhouse list (util.wheelhouse.listed_entries) reads the folder itself
    "verl_setup.util.wheelhouse": frozenset({"Wheelhouse"}),
    # verify (environment/verify_target.py, cluster/verify.py) read --lock themselves
    "verl_setup.environment.lock": frozenset(
        {"resolve", "compile_lock", "compile_pylock", "write_lock", "read_lock"}
    ),
}


def use_case_parts_imported(path: Path) -> list[str]:
    """`file:line name` for each import of a use case's assembly piece in `path`."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        pairs: list[tuple[str, str]] = []  # (module, name imported from it; "*": the module)
        if isinstance(node, ast.Import):
            pairs = [(a.name, "*") for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            for a in node.names:  # `from pkg import module` imports a module too
                whole = f"{node.module}.{a.name}"
                pairs.append((whole, "*") if whole in USE_CASE_PARTS else (node.module, a.name))
        for module, name in pairs:
            parts = (w for b, w in USE_CASE_PARTS.items() if module == b or module.startswith(b + "."))
            which = next(parts, frozenset())
            if which is None or (which and name in which):
                found.append(f"{where(path)}:{getattr(node, 'lineno', 0)} {module}.{name}")
    return found


def test_the_check_for_use_case_parts_catches_each_form(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(
        "import docker\n"
        "from verl_setup.plan.recipe import build_recipe, Recipe\n"
        "from verl_setup.image import engine\n"
        "from verl_setup.image.buildkit import BUILDERS, choose\n"
        "def f():\n"
        "    from verl_setup.environment.lock import compile_lock, Lock  # noqa\n"
    )
    assert use_case_parts_imported(sample) == [
        "sample.py:1 docker.*",
        "sample.py:2 verl_setup.plan.recipe.build_recipe",
        "sample.py:3 verl_setup.image.engine.*",
        "sample.py:4 verl_setup.image.buildkit.choose",
        "sample.py:6 verl_setup.environment.lock.compile_lock",
    ]


def test_commands_import_no_piece_a_use_case_assembles() -> None:
    """Every command ends in one use-case call: building a recipe, resolving wheels, compiling a
    lock, driving the image engine and builder, or checking, proposing and recording matrix rows
    is the use case's (environment/, image/, maintenance/, deliver/, doctor/, diagnose/)."""
    found = [hit for p in sorted((PACKAGE / "commands").rglob("*.py")) for hit in use_case_parts_imported(p)]
    # plan --cluster prints the cluster plan: making it is that command's one use-case call
    itself = re.compile(r"commands/plan_cluster\.py:\d+ verl_setup\.plan\.make\.make_cluster_plan")
    assert [h for h in found if not itself.fullmatch(h)] == []
