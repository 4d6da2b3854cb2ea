"""The conventions of uv and pip: no abbreviations, -v and -q everywhere, exit codes and variables
in --help, a terminal's status line ended before the prompt."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest

import verl_setup
from tests.conftest import run_cli
from verl_setup.cli import json_command, parse
from verl_setup.output import Progress, end_status_lines
from verl_setup.util.help_env import every_variable


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_an_abbreviated_flag_is_refused_not_guessed() -> None:
    # pip's and uv's --pre means pre-releases; argparse took it for --prefix.
    result = run_cli("install", "--pre", "x", "--dry-run")
    assert result.code == 2
    assert "unrecognized arguments: --pre x" in result.err
    with pytest.raises(SystemExit):
        parse(["matrix", "check", "--rec"])  # --record, a nested command's flag


@pytest.mark.parametrize(
    "argv",
    [
        ["plan", "-v", "-q"],
        ["plan", "--no-gpu", "--verbose"],
        ["matrix", "check", "-q", "--verbose"],
        ["docker", "build", "-q"],
        ["verify", "--quiet"],
    ],
    ids=["short", "long", "nested", "docker", "verify"],
)
def test_every_command_takes_verbose_and_quiet(argv: list[str]) -> None:
    args = parse(argv)
    assert hasattr(args, "verbose")
    assert hasattr(args, "quiet")


@pytest.mark.subprocess
def test_verbose_logs_every_program_run() -> None:
    result = run_cli("plan", "--no-gpu", "-v")
    assert result.code == 0, result.err
    assert "verl-setup: debug: run (" in result.err
    assert "(timeout " in result.err


def test_help_names_the_exit_codes_and_the_variables() -> None:
    for argv in (["--help"], ["install", "--help"]):
        result = run_cli(*argv)
        assert result.code == 0
        assert "exit codes: 0 ok, 1 unexpected error, 2 bad input" in result.out
        assert "3 no matrix row" in result.out
        assert "docs/reference/environment.md" in result.out
    assert "UV_CUDA_DRIVER_VERSION" in run_cli("install", "--help").out


@pytest.mark.parametrize(
    ("argv", "own", "not_own"),
    [
        (["diagnose"], [], ["VERL_SETUP_PROVE_GIT", "VERL_SETUP_DRIVER", "UV_*"]),
        (["completion"], [], ["VERL_SETUP_PROVE_GIT", "VERL_SETUP_WHEEL_SOURCES"]),
        (["install"], ["VERL_SETUP_DRIVER", "VERL_SETUP_WHEEL_SOURCES", "UV_*"], ["VERL_SETUP_PROVE_GIT"]),
        (
            ["matrix", "prove"],
            ["VERL_SETUP_PROVE_GIT", "VERL_SETUP_PROVE_EXTRA_INDEXES"],
            ["VERL_SETUP_DRIVER"],
        ),
        (["doctor"], ["VERL_SETUP_HOST", "VERL_SETUP_MATRIX"], ["VERL_SETUP_PROVE_WITH", "UV_*"]),
    ],
    ids=["diagnose", "completion", "install", "matrix-prove", "doctor"],
)
def test_each_help_lists_only_the_variables_its_command_reads(
    argv: list[str], own: list[str], not_own: list[str]
) -> None:
    # issue 32: the same 16-line list (mostly `matrix prove`'s) ended every --help.
    text = run_cli(*argv, "--help").out
    tail = text[text.index("environment: ") :]
    assert all(name in tail for name in own), tail
    assert not any(name in tail for name in not_own), tail
    assert "VERL_SETUP_DEBUG=1" in tail


def test_every_variable_the_package_reads_is_documented() -> None:
    """Each VERL_SETUP_* name in the package's code is in help_env (the plan facts as the list's
    `_SUFFIX` spellings) and in docs/reference/environment.md; VERL_SETUP_RESULT is a marker in a Ray
    task's output and VERL_SETUP_PROBE_SHARD what the import probe tells its own children, not
    settings."""
    package = Path(verl_setup.__file__).parent
    read = {
        m for p in package.rglob("*.py") for m in re.findall(r"VERL_SETUP_[A-Z0-9_]*[A-Z0-9]", p.read_text())
    }
    docs = (package.parents[1] / "docs" / "reference" / "environment.md").read_text(encoding="utf-8")
    for text in (every_variable(), docs):
        words = set(re.findall(r"[A-Z0-9_]+", text))
        documented = {w for w in words if w.startswith("VERL_SETUP_")} | {
            f"VERL_SETUP{w}" for w in words if w[0] == "_"
        }
        left = read - documented - {"VERL_SETUP_RESULT", "VERL_SETUP_PROVE", "VERL_SETUP_PROBE_SHARD"}
        assert left == set()


def test_the_last_status_line_is_ended_on_a_terminal() -> None:
    tty = Tty()
    progress = Progress(stream=tty)
    progress.step("plan", "row cpu")
    assert not tty.getvalue().endswith("\n")  # a live status line
    progress.step("done", "wrote the lock")
    assert tty.getvalue().endswith("done: wrote the lock\n")
    other = Tty()
    Progress(stream=other).step("venv", "creating")
    end_status_lines()  # what main does before an error line or the prompt
    assert other.getvalue().endswith("creating\n")


def test_the_json_command_name_is_read_from_the_command_line() -> None:
    assert json_command(["matrix", "check", "--json"]) == "matrix check"
    assert json_command(["plan", "-q", "--json"]) == "plan"
    assert json_command(["plan"]) is None
    assert json_command(["doctor", "--", "python", "--json"]) is None  # the launch command's flag


def test_quiet_drops_the_cluster_summary_and_keeps_a_missing_nodes_warning(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from dataclasses import replace  # noqa: PLC0415

    from tests.conftest import FIXTURES  # noqa: PLC0415
    from verl_setup.commands.detect_cluster import write  # noqa: PLC0415
    from verl_setup.host.cluster_file import MissingNode, load_cluster  # noqa: PLC0415

    cluster = replace(
        load_cluster(FIXTURES / "cluster" / "nodes-64.json"),
        missing=(MissingNode(name="n9", ip="10.0.0.9", reason="raylet died"),),
    )
    for quiet in (False, True):
        write(cluster, None, io.StringIO(), quiet=quiet)
        err = capsys.readouterr().err.splitlines()
        assert err[-1] == "verl-setup: warning: node n9 (10.0.0.9) gave no facts: raylet died"
        assert len(err) == (1 if quiet else 2)


def test_a_cluster_file_with_out_is_written_whole_and_the_json_is_the_same_text(tmp_path: Path) -> None:
    import json  # noqa: PLC0415

    from tests.conftest import FIXTURES  # noqa: PLC0415
    from verl_setup.commands.detect_cluster import write  # noqa: PLC0415
    from verl_setup.host.cluster_file import load_cluster  # noqa: PLC0415

    cluster = load_cluster(FIXTURES / "cluster" / "nodes-64.json")
    target, out = tmp_path / "cluster.json", io.StringIO()
    write(cluster, target, out, quiet=True)
    assert out.getvalue() == ""  # --out without --json: the file only
    assert [p.name for p in tmp_path.iterdir()] == ["cluster.json"]  # no .part left behind
    assert load_cluster(target).nodes == cluster.nodes
    write(cluster, target, out, as_json=True, quiet=True)
    assert json.loads(out.getvalue())["data"] == json.loads(target.read_text())


def test_quiet_install_on_a_cluster_keeps_each_nodes_finished_line_off_the_terminal(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The Ray driver's per-node lines are passed through live (stream) unless -q (run captures)."""
    import types  # noqa: PLC0415

    from verl_setup.cluster import ray_tasks  # noqa: PLC0415
    from verl_setup.cluster.install import install_on_nodes  # noqa: PLC0415

    answer = {"nodes": [{"node_id": "n1", "ip": "10.0.0.1", "probe": None, "error": "gone"}], "dead": []}
    calls: list[str] = []

    def driver(how: str) -> object:
        def call(*_args: object, **_kwargs: object) -> object:
            calls.append(how)
            return types.SimpleNamespace(stdout=ray_tasks.RESULT_MARK + json.dumps(answer), stderr="")

        return call

    monkeypatch.setattr(ray_tasks, "stream", driver("live"))
    monkeypatch.setattr(ray_tasks, "run", driver("captured"))
    for live in (True, False):
        (result,) = install_on_nodes(
            Path("/py"), "127.0.0.1:1", ["install"], only=(), env={}, timeout=5,
            reach="installed", runtime_env=None, live=live,
        )  # fmt: skip
        assert result.error == "gone"
    assert calls == ["live", "captured"]
