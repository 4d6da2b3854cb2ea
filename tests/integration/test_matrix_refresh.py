"""`matrix check` and `matrix propose` against an index on 127.0.0.1 (tests/integration/local_index.py).

The stand-ins have the real shape: a verl whose [vllm] extra pins an engine, the engine pinning a
torch and a flashinfer, the torch requiring a CUDA runtime package (as torch 2.9's wheels require
nvidia-cuda-runtime-cu12). uv resolves against this index alone (UV_DEFAULT_INDEX, no user config),
so the tests are deterministic and need no network.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import json_data
from tests.integration.local_index import LocalIndex, serve
from tests.integration.test_install import cli

LINUX = 'platform_system == "Linux"'
TORCH_TAGS = ("cp311-cp311-manylinux_2_28_x86_64", "cp312-cp312-manylinux_2_28_x86_64")

ROW = """\
schema: 1
rows:
  - id: verl1.0-vllm1.1.0
    verl: {version: "1.0.0", extras: [vllm]}
    engine: {name: vllm, version: "1.1.0"}
    python: {supported: ["3.12"], recommended: "3.12.1"}
    torch: {version: "2.9.0", cuda: "12.8", index: default}
    packages:
      flashinfer-python: "0.3.0"
      transformers: "4.55.0"
    requires:
      arch: [x86_64]
      glibc: "2.28"
      cuda: "12.8"
      driver: {compat: "525.60.13", strict: "570.26"}
      compute_capability: {min: "8.0", max: "12.0"}
    evidence:
      verl: "test fixture: stand-in verl whose [vllm] extra pins vllm 1.1.0"
      engine: "test fixture: pinned by verl 1.0.0 [vllm]"
      torch: "test fixture: vllm 1.1.0 pins torch 2.9.0, which requires nvidia-cuda-runtime-cu12 12.8"
      python: "test fixture"
      flashinfer-python: "test fixture: vllm 1.1.0 pins it"
      transformers: "test fixture: within verl's and vllm's ranges"
      requires.glibc: "test fixture: manylinux_2_28 torch wheels"
      requires.driver: "as the real CUDA 12.8 rows"
      requires.compute_capability: "as the real rows"
"""


def upload_torch(index: LocalIndex, version: str, cuda_runtime: str, date: str) -> None:
    for tag in TORCH_TAGS:
        index.upload(
            "torch",
            version,
            date=date,
            tag=tag,
            headers=("Requires-Python: >=3.10",),
            requires=(f"nvidia-cuda-runtime-cu12=={cuda_runtime}; {LINUX}", "typing-extensions>=4.10"),
        )


def populate(index: LocalIndex) -> None:
    """What the matrix row above was written from (all uploaded up to 2026-02-01)."""
    index.upload("typing-extensions", "4.12.0", date="2025-12-01")
    index.upload("nvidia-cuda-runtime-cu12", "12.8.90", date="2026-01-05")
    index.upload("tokenizers", "0.21.0", date="2026-01-01")
    index.upload("transformers", "4.55.0", date="2026-01-02", requires=("tokenizers>=0.21",))
    index.upload("flashinfer-python", "0.3.0", date="2026-01-10")
    upload_torch(index, "2.9.0", "12.8.90", "2026-01-10")
    index.upload(
        "vllm",
        "1.1.0",
        date="2026-01-20",
        headers=("Requires-Python: >=3.10",),
        requires=("torch==2.9.0", "flashinfer-python==0.3.0", "transformers>=4.50"),
    )
    index.upload(
        "verl",
        "1.0.0",
        date="2026-02-01",
        headers=("Requires-Python: <3.13,>=3.10", "Provides-Extra: vllm"),
        requires=(
            "transformers<4.60,>=4.50",
            'vllm==1.1.0; extra == "vllm"',
            'torch==2.9.0; extra == "vllm"',
        ),
    )


@pytest.fixture
def index(tmp_path: Path) -> Iterator[LocalIndex]:
    with serve(tmp_path / "index") as served:
        populate(served)
        yield served


def env_for(index: LocalIndex, tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VERL_SETUP_", "UV_", "PIP_"))}
    return {
        **env,
        "UV_DEFAULT_INDEX": index.url,
        "UV_NO_CONFIG": "1",
        "UV_CACHE_DIR": str(tmp_path / "uv-cache"),
        "UV_PYTHON_DOWNLOADS": "never",
    }


def run_json(*argv: str, env: dict[str, str], code: int = 0) -> dict[str, Any]:
    result = cli(*argv, "--json", env=env)
    assert result.returncode == code, result.stderr
    return dict(json_data(result.stdout))


@pytest.fixture
def matrix(tmp_path: Path) -> Path:
    path = tmp_path / "m" / "verl.yaml"
    path.parent.mkdir()
    path.write_text(ROW)
    return path


def check(matrix: Path, env: dict[str, str], code: int = 0, *flags: str) -> dict[str, Any]:
    data = run_json("matrix", "check", "--matrix", str(matrix), *flags, env=env, code=code)
    (row,) = data["rows"]
    return dict(row)


def test_check_reports_drift_then_a_deleted_and_a_yanked_pin_as_regressions(
    index: LocalIndex, matrix: Path, tmp_path: Path
) -> None:
    env = env_for(index, tmp_path)
    first = check(matrix, env, 0, "--record")
    assert (first["status"], first["baseline"], first["regressed"]) == ("resolves", False, False)
    recorded = yaml.safe_load((matrix.parent / "resolved.yaml").read_text())
    assert recorded["rows"]["verl1.0-vllm1.1.0"]["pins"]["tokenizers"].startswith("0.21.0 ")
    assert check(matrix, env)["status"] == "resolves"

    # A newer release inside the ranges: resolves differently, not a regression.
    index.upload("tokenizers", "0.22.0", date="2026-04-01")
    drift = check(matrix, env)
    assert drift["status"] == "resolves-differently"
    assert drift["moved"] == [
        {
            "name": "tokenizers",
            "from": "0.21.0",
            "to": "0.22.0",
            "why": "a newer release within the pins' ranges (tokenizers 0.22.0, uploaded 2026-04-01)",
            "regression": False,
        }
    ]

    # The release the row resolved to is deleted: a regression, named.
    index.delete("tokenizers-0.21.0-py3-none-any.whl")
    deleted = check(matrix, env, 5)
    assert deleted["regressed"] is True
    assert [m["why"] for m in deleted["moved"]] == ["tokenizers 0.21.0 was deleted from the index"]

    # A pin of the row itself is yanked: uv still takes an exact pin, and check says so.
    index.yank("transformers-4.55.0-py3-none-any.whl", "breaks tokenizers")
    yanked = check(matrix, env, 5)
    assert yanked["yanked"] == ["transformers==4.55.0 is yanked (breaks tokenizers)"]

    # A pin deleted outright: no longer resolves, with uv's reason in one line.
    index.delete("flashinfer_python-0.3.0-py3-none-any.whl")
    broken = check(matrix, env, 5)
    assert broken["status"] == "no-longer-resolves"
    assert "flashinfer-python" in broken["reason"]
    assert "\n" not in broken["reason"]
    # A regression never overwrites the baseline it was found against.
    cli("matrix", "check", "--matrix", str(matrix), "--record", env=env)
    assert yaml.safe_load((matrix.parent / "resolved.yaml").read_text()) == recorded


VERL_PYPROJECT = """\
[project]
name = "verl"
version = "1.1.0"

[tool.uv]
override-dependencies = ["transformers==4.55.0", "tokenizers>=0.21"]
conflicts = [[{ extra = "vllm" }, { extra = "sglang" }]]
"""


def publish_newer(index: LocalIndex) -> None:
    """Releases after the matrix: verl 1.1.0 [vllm] -> vllm 1.2.0 -> torch 2.10.0 (CUDA 12.9); vllm 1.3.0
    that needs a transformers verl 1.1.0 excludes; a torch no engine pins yet."""
    index.upload("nvidia-cuda-runtime-cu12", "12.9.79", date="2026-03-01")
    index.upload("transformers", "4.62.0", date="2026-03-01", requires=("tokenizers>=0.21",))
    index.upload("flashinfer-python", "0.4.0", date="2026-03-05")
    upload_torch(index, "2.10.0", "12.9.79", "2026-03-05")
    index.upload(
        "vllm",
        "1.2.0",
        date="2026-03-10",
        headers=("Requires-Python: >=3.10",),
        requires=("torch==2.10.0", "flashinfer-python==0.4.0", "transformers>=4.50"),
    )
    index.upload(
        "verl",
        "1.1.0",
        date="2026-03-15",
        headers=("Requires-Python: <3.13,>=3.10", "Provides-Extra: vllm"),
        requires=(
            "transformers<4.60,>=4.50",
            'vllm==1.2.0; extra == "vllm"',
            'torch==2.10.0; extra == "vllm"',
        ),
    )
    # verl's own uv settings, which only its sdist carries (as verl 0.9.1's pyproject.toml does).
    index.upload_sdist("verl", "1.1.0", date="2026-03-15", pyproject=VERL_PYPROJECT)
    index.upload(
        "vllm",
        "1.3.0",
        date="2026-03-20",
        headers=("Requires-Python: >=3.10",),
        requires=("torch==2.10.0", "flashinfer-python==0.4.0", "transformers>=4.62"),
    )
    upload_torch(index, "2.11.0", "12.9.79", "2026-03-25")


def test_propose_builds_a_row_from_metadata_and_refuses_what_cannot_fit(
    index: LocalIndex, matrix: Path, tmp_path: Path
) -> None:
    publish_newer(index)
    env = env_for(index, tmp_path)
    out = tmp_path / "candidates.yaml"
    data = run_json("matrix", "propose", "--matrix", str(matrix), "--out", str(out), env=env)
    assert data["since"] == "2026-02-01"  # verl 1.0.0, the newest release the matrix pins
    (candidate,) = data["candidates"]
    row = candidate["row"]
    assert row["id"] == "verl1.1-vllm1.2.0"
    assert row["verl"] == {"version": "1.1.0", "extras": ["vllm"]}
    assert row["engine"] == {"name": "vllm", "version": "1.2.0"}
    assert row["torch"] == {"version": "2.10.0", "cuda": "12.9", "index": "default"}
    assert row["python"] == {"supported": ["3.11", "3.12"], "recommended": "3.12.1"}
    assert row["packages"]["flashinfer-python"] == "0.4.0"
    assert row["packages"]["transformers"] == "4.55.0"  # resolved: verl 1.1.0 allows <4.60
    assert row["requires"]["driver"] == {"compat": "525.60.13", "strict": "575.51.03"}  # cuda.yaml 12.x, 12.9
    assert row["requires"]["glibc"] == "2.28"
    assert "nvidia-cuda-runtime-cu12==12.9.79" in row["evidence"]["torch"]
    assert row["evidence"]["flashinfer-python"] == "meta: vllm 1.2.0 pins flashinfer-python==0.4.0"
    assert "[vllm] pins vllm==1.2.0" in row["evidence"]["verl"]
    # verl's [tool.uv] overrides are data: carried into the row, narrowed to the row's own pins.
    assert row["overrides"] == ["transformers==4.55.0", "tokenizers>=0.21"]
    assert row["evidence"]["overrides"] == (
        "verl 1.1.0 pyproject.toml [tool.uv] override-dependencies (verl-1.1.0.tar.gz); "
        "its [tool.uv] conflicts keep vllm, sglang apart: the row takes [vllm]"
    )
    assert set(candidate["resolved"].values()) == {"ok"}
    assert set(candidate["resolved"]) == {"3.11 x86_64-manylinux_2_28", "3.12 x86_64-manylinux_2_28"}
    assert {r["release"]: r["reason"] for r in data["refused"]} == {
        "vllm 1.3.0": "vllm 1.3.0 needs transformers>=4.62, verl 1.1.0 allows transformers<4.60,>=4.50 "
        "(verl 1.1.0's [tool.uv] override-dependencies force transformers==4.55.0 for its own extras; "
        "not carried to an engine release verl does not pin)",
        "torch 2.11.0": "no vllm or sglang release proposed here pins it (a row's torch is its engine's pin)",
    }
    # The file is a rows file the matrix reader accepts as it stands (for review, then `make prove`).
    validated = cli("matrix", "validate", str(out), env=env)
    assert validated.returncode == 0, validated.stdout + validated.stderr
    assert "# refused vllm 1.3.0: vllm 1.3.0 needs transformers>=4.62" in out.read_text()
    assert (matrix.parent / "verl.yaml").read_text() == ROW  # nothing written into the matrix
    again = cli("matrix", "propose", "--matrix", str(matrix), "--out", str(out), env=env)
    assert again.returncode == 2
    assert "exists" in again.stderr


def test_an_unreachable_index_is_exit_4_not_a_regression_and_a_bad_date_is_exit_2(
    matrix: Path, tmp_path: Path
) -> None:
    with serve(tmp_path / "index") as index:
        env = env_for(index, tmp_path)
    env["UV_HTTP_RETRIES"] = "0"  # the server is gone: its port refuses connections
    result = cli("matrix", "check", "--matrix", str(matrix), env=env)
    assert result.returncode == 4, result.stderr
    assert "could not be reached" in result.stderr.splitlines()[-1]
    bad = cli("matrix", "propose", "--matrix", str(matrix), "--since", "2026-13-01", env=env)
    assert (bad.returncode, bad.stderr.strip()) == (
        2,
        "verl-setup: error: --since '2026-13-01': give a date as YYYY-MM-DD",
    )


# A row with a bridge installed last without its dependencies (whose own Requires-Dist conflicts
# with the row, as megatron-bridge 0.5.0's flashinfer pin does) and one from a direct reference.
LOOSE_ROW = ROW.replace(
    '      transformers: "4.55.0"\n',
    '      transformers: "4.55.0"\n      bridge: "0.5.0"\n      gitbridge: "0.1.0"\n'
    "    no_deps: [bridge, gitbridge]\n"
    '    sources: {gitbridge: "git+https://127.0.0.1:9/gitbridge.git@641a5a0"}\n',
).replace(
    '      requires.glibc: "test fixture: manylinux_2_28 torch wheels"\n',
    '      requires.glibc: "test fixture: manylinux_2_28 torch wheels"\n'
    '      bridge: "test fixture: its own pins conflict with the row"\n'
    '      gitbridge: "test fixture: a git source"\n'
    '      no_deps: "test fixture: installed last without dependencies"\n'
    '      sources: "test fixture: unreachable git"\n',
)


def test_check_leaves_no_deps_and_sources_packages_to_the_last_step_as_lock_does(
    index: LocalIndex, matrix: Path, tmp_path: Path
) -> None:
    index.upload("bridge", "0.5.0", date="2026-01-25", requires=("flashinfer-python==0.2.9",))
    matrix.write_text(LOOSE_ROW)
    env = env_for(index, tmp_path)
    row = check(matrix, env)  # resolved with its deps, the bridge's flashinfer pin would conflict
    assert (row["status"], row["regressed"]) == ("resolves", False)
    assert row["installed_last"] == [
        "bridge==0.5.0: on the index, installed last without its dependencies",
        "gitbridge: git+https://127.0.0.1:9/gitbridge.git@641a5a0, a direct reference installed last "
        "(not fetched here)",
    ]
    # The deps-free pin gone from the index is a regression, as the lock's `then:` step would fail.
    index.delete("bridge-0.5.0-py3-none-any.whl")
    gone = check(matrix, env, 5)
    assert gone["installed_last_gone"] == [
        "bridge==0.5.0 is not on the index (installed last without dependencies)"
    ]


def test_drift_alone_exits_0_and_is_said_apart_from_regressions(
    index: LocalIndex, matrix: Path, tmp_path: Path
) -> None:
    env = env_for(index, tmp_path)
    check(matrix, env, 0, "--record")
    index.upload("tokenizers", "0.22.0", date="2026-04-01")
    data = run_json("matrix", "check", "--matrix", str(matrix), env=env, code=0)
    assert (data["drifted"], data["regressed"]) == (["verl1.0-vllm1.1.0"], [])
    assert data["rows"][0]["drifted"] is True
    help_text = cli("matrix", "check", "--help", env=env).stdout
    assert "Exit 0" in help_text
    assert "Exit 5: a regression" in help_text


def test_propose_searches_the_lowest_glibc_at_which_a_candidate_resolves(
    index: LocalIndex, matrix: Path, tmp_path: Path
) -> None:
    """Installs are binary-only: an engine whose dependency publishes only manylinux_2_31 wheels
    (as vLLM's llguidance 1.7.x) does not resolve at torch's manylinux_2_28, so propose raises the
    floor to the lowest that resolves and records the floor its wheels need (as `matrix prove`)."""
    publish_newer(index)
    for tag in ("cp311-cp311-manylinux_2_31_x86_64", "cp312-cp312-manylinux_2_31_x86_64"):
        index.upload("llguide", "1.7.6", date="2026-03-21", tag=tag)
    index.upload(
        "vllm",
        "1.2.1",
        date="2026-03-22",
        headers=("Requires-Python: >=3.10",),
        requires=("torch==2.10.0", "flashinfer-python==0.4.0", "transformers>=4.50", "llguide>=1.7,<1.8"),
    )
    env = env_for(index, tmp_path)
    data = run_json("matrix", "propose", "--matrix", str(matrix), env=env)
    by_id = {c["row"]["id"]: c for c in data["candidates"]}
    raised = by_id["verl1.1-vllm1.2.1"]
    assert raised["row"]["requires"]["glibc"] == "2.31"
    assert "llguide" in raised["resolved"]["3.11 x86_64-manylinux_2_28"]
    assert raised["resolved"]["3.11 x86_64-manylinux_2_31"] == "ok"
    assert raised["resolved"]["3.12 x86_64-manylinux_2_31"] == "ok"
    assert raised["row"]["python"]["supported"] == ["3.11", "3.12"]
    assert "set by llguide 1.7.6 (manylinux_2_31)" in raised["row"]["evidence"]["requires.glibc"]
    assert by_id["verl1.1-vllm1.2.0"]["row"]["requires"]["glibc"] == "2.28"  # unchanged where it resolves
