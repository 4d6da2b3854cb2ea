"""Every `--json` output is one envelope (schema 2: command, ok, error on failure, data), and each
command's data validates against the JSON Schema the package publishes (verl_setup/schemas/).
One contract per command, success and failure, run as a user would (a fresh process)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.contract import valid
from tests.integration.test_install import TINY_MATRIX, cli, tiny_env

pytestmark = [pytest.mark.network]


def envelope_of(*argv: str, code: int = 0, env: dict[str, str] | None = None) -> dict[str, Any]:
    """Run a command; its stdout is exactly one valid envelope, ok exactly when it exits 0."""
    result = cli(*argv, env=env or tiny_env())
    assert result.returncode == code, result.stderr
    doc = valid(json.loads(result.stdout))
    assert list(doc)[:3] == ["schema", "command", "ok"]
    assert doc["ok"] is (code == 0)
    if code:
        assert doc["error"]["code"] == code
        assert doc["error"]["message"] in result.stderr
    return doc


def as_json(*argv: str, code: int = 0, env: dict[str, str] | None = None) -> dict[str, Any]:
    """The data of a command's envelope."""
    data = envelope_of(*argv, code=code, env=env)["data"]
    assert isinstance(data, dict)
    return data


def test_detect() -> None:
    data = as_json("detect", "--json")
    assert {"os", "pythons", "nvidia", "gpus", "cuda_toolkits", "tools", "env", "host_kind"} <= set(data)
    assert data["host_kind"]["kind"] in ("linux", "wsl", "jetson")


def test_plan() -> None:
    data = as_json("plan", "--json", "--no-gpu")
    assert {
        "row",
        "proof",
        "python",
        "policy",
        "requirements",
        "facts",
        "warnings",
        "rejected",
        "matrix",
        "extensions",
    } <= set(data)


def test_matrix_list_show_validate() -> None:
    listing = as_json("matrix", "list", "--json")
    assert {"matrix", "sha256", "rows"} <= set(listing)
    # Whole or reduced: a row proven with a package built against torch left out says so.
    assert all(set(r["proof"]) == {"level", "detail", "whole_stack", "left_out"} for r in listing["rows"])
    shown = as_json("matrix", "show", "cpu", "--json")
    assert shown["row"]["id"] == "cpu"
    assert set(shown["proof"]) == {"level", "detail", "whole_stack", "left_out"}
    assert as_json("matrix", "validate", "--json")["ok"] is True


def test_render(tmp_path: Path) -> None:
    data = as_json("render", "env", "--no-gpu", "--out", str(tmp_path), "--json")
    assert [f["name"] for f in data["files"]] == ["env.sh", "env.list"]


def test_doctor_has_one_entry_per_check_in_one_shape() -> None:
    from verl_setup.util.vocab import CHECK_IDS  # noqa: PLC0415

    result = cli("doctor", "--json", env=tiny_env())
    doc = valid(json.loads(result.stdout))
    assert doc["ok"] is (result.returncode == 0)  # no GPU here: the cuda check fails, exit 5
    if result.returncode:
        assert doc["error"]["code"] == 5
        assert "checks failed: " in doc["error"]["message"]
    data = doc["data"]
    assert [c["id"] for c in data["checks"]] == list(CHECK_IDS)  # memory and collective included
    for check in data["checks"]:
        assert set(check) == {"id", "status", "summary", "evidence", "remedy", "findings"}, check["id"]
        assert check["status"] in ("pass", "warn", "fail", "skip")


def test_install_verify_lock_and_a_failed_install(tmp_path: Path) -> None:
    prefix = tmp_path / "env"
    installed = as_json("install", "--matrix", str(TINY_MATRIX), "--prefix", str(prefix), "--json")
    assert {"ok", "seconds", "manifest", "steps", "import"} <= set(installed)
    verified = as_json("verify", "--prefix", str(prefix), "--json")
    assert {"ok", "prefix", "python", "findings", "distributions", "import"} <= set(verified)
    lock = tmp_path / "l.lock"
    locked = as_json("lock", "--matrix", str(TINY_MATRIX), "--out", str(lock), "--json")
    assert {"out", "sha256", "row", "python", "distributions"} <= set(locked)
    failed = envelope_of(
        "install", "--matrix", str(TINY_MATRIX), "--prefix", str(tmp_path), "--json", code=2
    )  # tmp_path holds files and is no venv: refused
    assert failed["data"]["steps"][0]["step"] == "plan"
    dry = as_json(
        "install", "--matrix", str(TINY_MATRIX), "--prefix", str(tmp_path / "new"), "--dry-run", "--json"
    )
    assert dry["commands"][0]["step"] == "venv"
    assert not (tmp_path / "new").exists()


def test_prove(tmp_path: Path) -> None:
    matrix = tmp_path / "verl.yaml"
    matrix.write_text(TINY_MATRIX.read_text())
    # The tiny row's stand-in verl has no trainer: its proof stops before `trains`, and says so.
    env = {**tiny_env(), "VERL_SETUP_PROVE_TRAINS": "0"}
    data = as_json("matrix", "prove", "tiny-new", "--matrix", str(matrix), "--json", env=env)
    (row,) = data["rows"]
    assert row["reached"] == ["resolves", "installs", "imports"]
    assert (tmp_path / "proof.yaml").is_file()
    # The resolution it proved is the baseline `matrix check` compares with.
    assert "tiny-new:" in (tmp_path / "resolved.yaml").read_text()


def test_matrix_check_and_propose(tmp_path: Path) -> None:
    from tests.integration.local_index import serve  # noqa: PLC0415
    from tests.integration.test_matrix_refresh import ROW, env_for, populate  # noqa: PLC0415

    matrix = tmp_path / "m" / "verl.yaml"
    matrix.parent.mkdir()
    matrix.write_text(ROW)
    with serve(tmp_path / "index") as index:
        populate(index)
        env = env_for(index, tmp_path)
        checked = as_json("matrix", "check", "--matrix", str(matrix), "--json", env=env)
        assert {"rows", "regressed", "seconds"} <= set(checked)
        assert {"row", "status", "regressed", "reason", "baseline", "yanked", "moved", "seconds"} <= set(
            checked["rows"][0]
        )
        index.delete("flashinfer_python-0.3.0-py3-none-any.whl")
        failed = as_json("matrix", "check", "--matrix", str(matrix), "--json", env=env, code=5)
        assert failed["regressed"] == ["verl1.0-vllm1.1.0"]
        proposed = as_json("matrix", "propose", "--matrix", str(matrix), "--json", env=env)
        assert {"since", "index", "candidates", "refused", "out"} <= set(proposed)


def test_no_fitting_row_is_a_result_with_the_nearest_rows() -> None:
    data = as_json("plan", "--driver", "450.80.02", "--gpu", "V100", "--json", code=3)
    assert data["row"] is None
    assert data["nearest"]
    assert {r["id"] for r in data["nearest"]} <= {r["id"] for r in data["rejected"]}
    assert data["facts"]["driver"] == {"value": "450.80.02", "source": "flag --driver"}


@pytest.mark.parametrize(
    ("argv", "code"),
    [
        (("matrix", "show", "nonexistent", "--json"), 2),
        (("render", "bogus", "--json"), 2),
        (("doctor", "--check", "bogus", "--json"), 2),
        (("verify", "--prefix", "/nonexistent", "--json"), 2),
        (("lock", "--json"), 2),
        (("plan", "--no-such-flag", "--json"), 2),  # argparse's own refusal
        (("install", "--pre", "x", "--dry-run", "--json"), 2),  # --pre is not --prefix (pip, uv)
    ],
    ids=["matrix-show", "render", "doctor", "verify", "lock", "usage", "abbrev"],
)
def test_a_failure_is_an_envelope_too(argv: tuple[str, ...], code: int) -> None:
    doc = envelope_of(*argv, code=code)
    assert doc["data"] is None
    assert doc["command"] == (" ".join(argv[:2]) if argv[0] == "matrix" else argv[0])
