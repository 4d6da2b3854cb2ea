"""The row that installs whole is preferred, against a stand-in of verl's wheelhouse on 127.0.0.1.

A copy of the real matrices/ whose verl-wheelhouse URL points at the stand-in (test_wheel_source_check's
layout). The torch 2.11 world is empty and the torch 2.13 world holds flash-attn 2.8.3 and
TransformerEngine 2.16.1 (audit 2026-12-c, E1): what `matrix check` sees there is recorded through
its own code (maintenance/source_check.py, the stand-in read over HTTP), then `plan` for an H100 on
driver 580 takes the torch 2.13 row (vLLM 0.31) over the torch 2.11 rows and says why; with
`--prefer order` it takes the first row as before. `install` of a torch 2.11 row looks again and
refuses in one line naming the source, the world, the date the wheel was last seen and the choices.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import json_data
from tests.integration.test_install import cli
from tests.integration.test_wheel_source_check import Wheelhouse, wheelhouse  # noqa: F401  # a fixture
from verl_setup.environment.wheel_pick import wheel_links
from verl_setup.maintenance.source_check import check_source, checkable
from verl_setup.matrix.load import load_matrix
from verl_setup.matrix.wheel_seen import load_seen, record_seen

MATRICES = Path(__file__).resolve().parents[2] / "matrices"
REAL_URL = "https://verl-project.github.io/verl-wheelhouse/{cuda_tag}/torch{torch_minor}/simple/"
H100 = ("--driver", "580.95.05", "--gpu", "H100", "--python", "3.12", "--glibc", "2.39", "--arch", "x86_64")


@pytest.fixture
def matrix(tmp_path: Path, wheelhouse: Wheelhouse) -> Path:  # noqa: F811  # the fixture
    folder = tmp_path / "matrices"
    shutil.copytree(MATRICES, folder)
    rows = folder / "verl.yaml"
    text = rows.read_text()
    assert REAL_URL in text
    rows.write_text(text.replace(REAL_URL, f"{wheelhouse.base}/{{cuda_tag}}/torch{{torch_minor}}/simple/"))
    return rows


def record(rows: Path, date: str) -> None:
    """What `matrix check --record` writes of the wheel sources, read from the stand-in."""
    m = load_matrix(rows)
    seen = load_seen(rows)
    updates = {}
    for source in checkable(m.rows_file):
        found = check_source(source, seen.get(source.id), today=date, links=wheel_links)
        updated = found.record(seen.get(source.id))
        assert updated is not None
        updates[source.id] = updated
    record_seen(rows, updates)


def plan(rows: Path, *flags: str) -> dict[str, Any]:
    result = cli("plan", *H100, "--matrix", str(rows), "--json", *flags, env=None)
    assert result.returncode == 0, result.stderr
    return json_data(result.stdout)


def test_with_the_torch_2_11_world_empty_plan_prefers_the_row_that_installs_whole(
    matrix: Path,
    wheelhouse: Wheelhouse,  # noqa: F811  # the fixture imported above
    tmp_path: Path,
) -> None:
    record(matrix, "2026-12-01")
    before = plan(matrix)
    assert before["row"]["id"] == "verl0.9-vllm0.24.0"  # both worlds full: the matrix's order
    assert (before["installs_whole"], before["prefer"]) == (True, "whole")

    wheelhouse.empty("cu130/torch2.11")
    # install looks again before it relies on the source (the record still says "present").
    prefix = tmp_path / "env"
    refused = cli(
        "install",
        *H100,
        "--matrix",
        str(matrix),
        "--row",
        "verl0.9-vllm0.24.0",
        "--prefix",
        str(prefix),
        env=None,
    )
    assert refused.returncode == 4, refused.stderr
    (line,) = [x for x in refused.stderr.splitlines() if x.startswith("verl-setup: error:")]
    assert "verl-wheelhouse: no flash-attn 2.8.3 wheel for 3.12.3 on this platform any more" in line
    assert (
        f"(world cu130/torch2.11 at {wheelhouse.base}/cu130/torch2.11/simple/; last seen 2026-12-01" in line
    )
    assert "--build-flash-attn" in line
    assert "--without flash-attn" in line
    assert "--wheel-source DIR" in line
    assert not prefix.exists()

    record(matrix, "2026-12-07")
    chosen = plan(matrix)
    assert chosen["row"]["id"] == "verl0.9-vllm0.31.0"
    assert (chosen["installs_whole"], chosen["missing_wheels"]) == (True, [])
    assert chosen["facts"]["prefer"] == {"value": "whole", "source": "default"}
    lost = {r["id"]: r["reasons"] for r in chosen["rejected"]}
    (why,) = lost["verl0.9-vllm0.24.0"]
    assert why.startswith(
        "fits, but verl0.9-vllm0.31.0 is preferred: it installs whole from wheels (--prefer whole), "
        "this row does not: flash-attn 2.8.3: "
    )
    assert (
        "verl-wheelhouse: cu130/torch2.11 had no flash-attn 2.8.3 for Python 3.12 on x86_64 when last "
        "checked (2026-12-07; last seen 2026-12-01)"
    ) in why
    explained = cli("plan", *H100, "--matrix", str(matrix), "--explain", env=None)
    assert "not preferred: " in explained.stdout
    assert "it installs whole from wheels (" in explained.stdout
    every = cli("plan", *H100, "--matrix", str(matrix), "--explain", "--all-rows", env=None)
    assert "verl0.9-vllm0.31.0 is preferred: it installs whole from wheels" in every.stdout

    # install of it, with no flag, takes flash-attn from the torch 2.13 world (looked up again);
    # --dry-run prints the uv commands it would run and changes nothing (the real GPU stack is
    # not installed on a machine without a GPU).
    dry = cli("install", *H100, "--matrix", str(matrix), "--prefix", str(prefix), "--dry-run", env=None)
    assert dry.returncode == 0, dry.stderr
    assert (
        f"{wheelhouse.base}/cu130/torch2.13/releases/flash_attn-2.8.3-cp312-cp312-linux_x86_64.whl"
        in dry.stdout
    )
    assert "verl0.9-vllm0.31.0" in dry.stderr + dry.stdout
    assert not prefix.exists()

    # The knob: matrix order, as before (visible in the JSON, with its source).
    ordered = plan(matrix, "--prefer", "order")
    assert ordered["row"]["id"] == "verl0.9-vllm0.24.0"
    assert ordered["installs_whole"] is False
    assert ordered["facts"]["prefer"] == {"value": "order", "source": "flag --prefer"}
