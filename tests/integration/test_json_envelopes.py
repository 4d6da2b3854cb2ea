"""The JSON contract, complete: every command the parser has with --json, in each mode that changes
its shape, has a published schema and a success and a failure case whose envelope validates.

The commands come from the parser, so a new one (or a new nested one) fails here until it has a
schema and cases. The cheap cases run here, in-process; the ones that need the package index, a
Ray head, a Docker engine or nvcc are named in ELSEWHERE, each a test that reads its envelope
through `json_data` or the contract tests' helpers (both validate against the schemas)."""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import sys
from pathlib import Path

import pytest

from tests.conftest import FIXTURES, run_cli
from tests.contract import valid
from verl_setup import cli
from verl_setup.output import SCHEMA, schema_path

SCHEMAS = schema_path("envelope").parent
TMP = "{tmp}"  # replaced by the test's tmp_path

# (command, mode) -> [(argv, exit code)]. A mode is the flag that changes the data's shape ("" for
# none); every mode named must be an option of that command.
CASES: dict[tuple[str, str], list[tuple[tuple[str, ...], int]]] = {
    ("detect", ""): [(("detect", "--json"), 0), (("detect", "--json", "--bogus"), 2)],
    ("detect", "--ray"): [(("detect", "--ray", "127.0.0.1:1", "--python", "/nonexistent/py", "--json"), 2)],
    ("detect", "--slurm"): [(("detect", "--slurm", "--json"), 2)],
    ("smoke", ""): [(("smoke", "--prefix", "/nonexistent/env", "--json"), 2)],
    ("plan", ""): [
        (("plan", "--no-gpu", "--json"), 0),
        (("plan", "--driver", "450.80.02", "--gpu", "V100", "--json"), 3),  # the nearest rows
    ],
    ("plan", "--cluster"): [
        (("plan", "--cluster", str(FIXTURES / "cluster" / "nodes-64.json"), "--json"), 0),
        (("plan", "--cluster", "/nonexistent", "--json"), 2),
    ],
    ("matrix list", ""): [
        (("matrix", "list", "--json"), 0),
        (("matrix", "list", "--matrix", "/nonexistent", "--json"), 2),
    ],
    ("matrix show", ""): [(("matrix", "show", "cpu", "--json"), 0), (("matrix", "show", "no", "--json"), 2)],
    ("matrix validate", ""): [
        (("matrix", "validate", "--json"), 0),
        (("matrix", "validate", f"{TMP}/bad.yaml", "--json"), 2),  # the problems, as data
    ],
    ("matrix prove", ""): [(("matrix", "prove", "nonexistent", "--json"), 2)],
    ("matrix check", ""): [(("matrix", "check", "nonexistent", "--json"), 2)],
    ("matrix propose", ""): [(("matrix", "propose", "--since", "notadate", "--json"), 2)],
    ("render", ""): [
        (("render", "env", "--no-gpu", "--out", f"{TMP}/r", "--json"), 0),
        (("render", "bogus", "--json"), 2),
    ],
    ("render", "--dry-run"): [
        (("render", "env", "--no-gpu", "--out", f"{TMP}/d", "--dry-run", "--json"), 0),
        (("render", "env", "--python", "2.7", "--out", f"{TMP}/d", "--dry-run", "--json"), 2),
    ],
    ("docker build", ""): [(("docker", "build", "--no-gpu", "--json"), 2)],  # no --tag
    ("docker build", "--print-context"): [
        (("docker", "build", "--no-gpu", "--print-context", "--json"), 0),
        (
            (
                "docker",
                "build",
                "--print-context",
                "--gpu",
                "Nonesuch 9000",
                "--driver",
                "580.95.05",
                "--json",
            ),
            2,
        ),
    ],
    ("install", ""): [(("install", "--no-gpu", "--prefix", TMP, "--json"), 2)],  # not a venv
    ("install", "--dry-run"): [
        (("install", "--no-gpu", "--prefix", f"{TMP}/new", "--dry-run", "--json"), 0),
        (("install", "--no-gpu", "--prefix", TMP, "--dry-run", "--json"), 2),
    ],
    ("install", "--cluster"): [(("install", "--cluster", "/nonexistent", "--prefix", "rel", "--json"), 2)],
    ("lock", ""): [(("lock", "--json"), 2)],  # no --out
    ("bundle", ""): [(("bundle", "--out", f"{TMP}/b", "--row", "nonexistent", "--json"), 2)],
    ("verify", ""): [
        (("verify", "--prefix", "/nonexistent", "--json"), 2),
        (("verify", "--python", sys.executable, "--row", "cpu", "--no-import", "--json"), 5),  # findings
    ],
    ("verify", "--ray"): [(("verify", "--ray", "127.0.0.1:1", "--python", "/nonexistent/py", "--json"), 2)],
    ("wheelhouse build", ""): [(("wheelhouse", "build", "--row", "no", "--out", f"{TMP}/w", "--json"), 2)],
    ("wheelhouse list", ""): [
        (("wheelhouse", "list", TMP, "--json"), 0),  # an empty wheelhouse
        (("wheelhouse", "list", "/nonexistent", "--json"), 2),
    ],
    ("wheelhouse list", "--verify"): [
        (("wheelhouse", "list", TMP, "--verify", "--json"), 0),
        (("wheelhouse", "list", "/nonexistent", "--verify", "--json"), 2),
    ],
    ("doctor", ""): [
        (("doctor", "--check", "python", "--json"), 0),
        (("doctor", "--check", "bogus", "--json"), 2),
    ],
    ("diagnose", ""): [
        (
            (
                "diagnose",
                "--no-system",
                "--json",
                str(FIXTURES / "diagnose" / "cuda-oom-trainer-verl-2828.log"),
            ),
            0,
        ),
        (("diagnose", "/nonexistent", "--json"), 2),
    ],
}

# A test in tests/integration ("module::function") -> the (command, mode, outcome) it validates.
ELSEWHERE: dict[str, list[tuple[str, str, str]]] = {
    "test_cluster_ray::test_detect_gives_both_nodes_and_plan_names_the_odd_one": [
        ("detect", "--ray", "success")
    ],
    "test_cluster_slurm::test_detect_through_srun_inside_salloc_gives_the_cluster_file": [
        ("detect", "--slurm", "success")
    ],
    "test_json_contract::test_prove": [("matrix prove", "", "success")],
    "test_json_contract::test_matrix_check_and_propose": [
        ("matrix check", "", "success"),
        ("matrix propose", "", "success"),
    ],
    "test_docker_build::build": [("docker build", "", "success")],
    "test_json_contract::test_install_verify_lock_and_a_failed_install": [
        ("install", "", "success"),
        ("lock", "", "success"),
        ("verify", "", "success"),
    ],
    "test_cluster_ray::test_install_on_node_local_prefixes_then_verify_passes_on_both": [
        ("install", "--cluster", "success")
    ],
    "test_verify::test_cluster_verify_reports_a_node_whose_packages_differ": [
        ("verify", "--ray", "success"),
        ("verify", "--ray", "failure"),
    ],
    "test_wheelhouse::house": [("wheelhouse build", "", "success")],
    "test_bundle::bundle_json": [("bundle", "", "success")],
    "test_smoke::test_smoke_trains_two_grpo_steps_in_a_cpu_row_env": [("smoke", "", "success")],
}
COVERED_ELSEWHERE = {case for cases in ELSEWHERE.values() for case in cases}
# What a test calls to read an envelope: each validates it against the published schemas.
VALIDATING = ("json_data", "valid", "as_json", "envelope_of", "validate")


def json_commands() -> dict[str, set[str]]:
    """Every command path the parser has with --json, with its option strings."""

    def visit(p: argparse.ArgumentParser, path: str) -> dict[str, set[str]]:
        found: dict[str, set[str]] = {}
        options = {s for a in p._actions for s in a.option_strings}  # argparse has no public walk
        if "--json" in options:
            found[path] = options
        for action in p._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, child in action.choices.items():
                    found |= visit(child, f"{path} {name}".strip())
        return found

    return visit(cli.build_parser(), "")


def test_every_json_command_has_a_schema_a_success_and_a_failure() -> None:
    commands = json_commands()
    published = {p.stem for p in SCHEMAS.glob("*.json")} - {"envelope"}
    assert published == {c.replace(" ", "-") for c in commands}  # a schema each, none left over
    envelope = json.loads(schema_path("envelope").read_text())
    assert set(envelope["properties"]["command"]["enum"]) == set(commands)
    nested = {c.split()[0] for c in commands if " " in c}
    assert nested == set(cli.NESTED)  # a failure's envelope names both words of these
    for command, mode in CASES:
        assert command in commands, command
        assert mode == "" or mode in commands[command], f"{command}: no option {mode}"
    for command, mode, _ in COVERED_ELSEWHERE:
        assert (command, mode) in CASES, (command, mode)
    for (command, mode), cases in CASES.items():
        for outcome in ("success", "failure"):
            here = [code for _, code in cases if (code == 0) == (outcome == "success")]
            assert here or (command, mode, outcome) in COVERED_ELSEWHERE, f"no {outcome}: {command} {mode}"
    assert {c for c, _ in CASES} == set(commands)


@pytest.mark.parametrize("where", sorted(ELSEWHERE))
def test_each_case_elsewhere_is_a_function_that_reads_its_envelope_through_the_schemas(where: str) -> None:
    module, name = where.split("::")
    tree = ast.parse((Path(__file__).parent / f"{module}.py").read_text())
    (function,) = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == name]
    calls = [n.func for n in ast.walk(function) if isinstance(n, ast.Call)]
    called = {
        f.id if isinstance(f, ast.Name) else f.attr for f in calls if isinstance(f, ast.Name | ast.Attribute)
    }
    assert called & set(VALIDATING), f"{where} reads no envelope through {VALIDATING}"


@pytest.mark.parametrize(
    ("argv", "code"),
    [case for cases in CASES.values() for case in cases],
    ids=[f"{c}{m and ' ' + m}:{code}" for (c, m), cases in CASES.items() for _, code in cases],
)
def test_each_case_prints_one_valid_envelope(argv: tuple[str, ...], code: int, tmp_path: Path) -> None:
    (tmp_path / "wheels").mkdir()
    (tmp_path / "bad.yaml").write_text("rows:\n  - id: broken\n    verl: {version: 0.9.1}\n")
    result = run_cli(*(a.replace(TMP, str(tmp_path)) for a in argv))
    assert result.code == code, result.err
    doc = valid(json.loads(result.out))
    assert doc["ok"] is (code == 0)
    assert doc["command"] == cli.json_command(list(argv))
    if code:
        assert doc["error"]["code"] == code
        assert doc["error"]["message"] in result.err
    if code == 3:  # no row fits: a result, with the nearest rows
        assert doc["data"]["row"] is None
        assert doc["data"]["nearest"]


def schemas_digest() -> str:
    """One hash over every published schema file."""
    h = hashlib.sha256()
    for path in sorted(SCHEMAS.glob("*.json")):
        h.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


def test_the_schema_version_changes_when_a_shape_does() -> None:
    """schemas/VERSIONS records the schemas' digest at each envelope version: an edited schema is a
    new version (bump output.SCHEMA and envelope.json's const, then add the line this names)."""
    lines = (SCHEMAS / "VERSIONS").read_text().splitlines()
    versions = dict(line.split() for line in lines if line and not line.startswith("#"))
    envelope = json.loads(schema_path("envelope").read_text())
    assert envelope["properties"]["schema"]["const"] == SCHEMA
    assert max(int(v) for v in versions) == SCHEMA, f"add the line '{SCHEMA} {schemas_digest()}' to VERSIONS"
    assert versions[str(SCHEMA)] == schemas_digest(), (
        f"the published schemas changed: bump output.SCHEMA to {SCHEMA + 1} and envelope.json's "
        f"schema const, then add '{SCHEMA + 1} {schemas_digest()}' to schemas/VERSIONS"
    )
