"""issue 32, item 9: names people type. `--gpu "RTX 4090"` and `4090` are the GeForce RTX 4090;
`--driver 580` is a branch, planned against its lowest release (saying so); a mistyped command
gets a "did you mean"."""

from __future__ import annotations

import pytest

from tests.conftest import json_data, run_cli


@pytest.mark.parametrize("name", ["RTX 4090", "4090", "GeForce RTX 4090", "rtx 4090"])
def test_the_ways_people_name_a_4090_all_plan_as_sm_8_9(name: str) -> None:
    result = run_cli("plan", "--json", "--gpu", name, "--driver", "580.95.05")
    assert result.code == 0, result.err
    gpus = json_data(result.out)["facts"]["gpus"]["value"]
    assert [g["compute_capability"] for g in gpus] == ["8.9"]


def test_a_driver_branch_plans_against_its_lowest_release_and_says_so() -> None:
    result = run_cli("plan", "--json", "--gpu", "H100", "--driver", "580")
    assert result.code == 0, result.err
    data = json_data(result.out)
    assert data["facts"]["driver"]["value"] == "580.65.06"
    assert any(
        w.startswith("driver branch 580: planned against its lowest release 580.65.06")
        for w in data["warnings"]
    )
    text = run_cli("plan", "--gpu", "H100", "--driver", "R580").out
    assert "warning    driver branch 580: planned against its lowest release 580.65.06" in text


def test_a_branch_the_cuda_table_does_not_know_is_one_clear_line() -> None:
    result = run_cli("plan", "--gpu", "H100", "--driver", "999")
    assert result.code == 2
    assert result.err.strip() == (
        "verl-setup: error: driver branch 999: no release of it in cuda.yaml; give the full version "
        "(nvidia-smi's, such as 580.95.05)"
    )


@pytest.mark.parametrize(("argv", "meant"), [(["instal"], "install"), (["matrix", "chek"], "check")])
def test_a_mistyped_command_gets_did_you_mean(argv: list[str], meant: str) -> None:
    result = run_cli(*argv)
    assert result.code == 2
    assert f"(did you mean '{meant}'?)" in result.err
