"""issue 32, item 6: diagnose on the walk's failed runs. A drift traceback (antlr4's `Could not
deserialize ATN`, recorded from a real cpu-row env after `uv pip install antlr4-python3-runtime==4.13.2`)
points at `verify`; a two-node NCCL timeout that only ranks 0-3 report says the other node never
reported; the OOM names torch's reserved-but-unallocated clue (expandable_segments)."""

from __future__ import annotations

import re
from pathlib import Path

from verl_setup.diagnose.sources import gather
from verl_setup.diagnose.verdict import Diagnosis, diagnose

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "diagnose"


def run(*paths: Path) -> Diagnosis:
    return diagnose(gather(list(paths), {}, system=False))


def test_a_drifted_antlr4_is_an_import_failure_that_points_at_verify() -> None:
    d = run(FIXTURES / "drift-antlr4-atn.log")
    assert d.verdict is not None
    assert d.cls == "import-error"
    assert (
        "antlr4-python3-runtime is not the version omegaconf/hydra's parser was generated for"
        in d.verdict.summary
    )
    assert d.verdict.remedy[0].startswith("`verl-setup verify --prefix ENV` names what changed since install")
    assert [e.line for e in d.verdict.evidence] == [
        32
    ]  # the exception line, not the source line quoted above it


def two_node_timeout(tmp_path: Path, *, launch: bool) -> Path:
    """The recorded watchdog line (verl#5750) as ranks 0-3 of a 2 x 4 launch print it; ranks 4-7
    (the second node) print nothing."""
    recorded = (FIXTURES / "nccl-timeout-verl-5750.log").read_text().splitlines()[1]
    command = "python3 -m verl.trainer.main_ppo trainer.nnodes=2 trainer.n_gpus_per_node=4"
    lines = [command] if launch else []
    for rank in range(4):
        lines.append(
            re.sub(r"\[rank0\]", f"[rank{rank}]", recorded)
            .replace("Rank 0", f"Rank {rank}")
            .replace("pid=7591", f"pid={7591 + rank}")
        )
    log = tmp_path / "run.log"
    log.write_text("\n".join(lines) + "\n")
    return log


def test_a_two_node_timeout_that_only_the_first_node_reports_names_the_silent_node(tmp_path: Path) -> None:
    d = run(two_node_timeout(tmp_path, launch=True))
    assert d.verdict is not None
    assert d.cls == "nccl-timeout"
    assert (
        "rank(s) 4-7 of the launch's 8 (trainer.nnodes=2 x trainer.n_gpus_per_node=4) never reported: "
        "node 2 of 2 (4 ranks per node), which never reached this collective"
    ) in d.verdict.summary
    assert d.verdict.remedy[0].startswith("read the log of node 2 of 2")


def test_without_the_launch_line_no_silent_node_is_claimed(tmp_path: Path) -> None:
    d = run(two_node_timeout(tmp_path, launch=False))
    assert d.verdict is not None
    assert "never reported" not in d.verdict.summary


def test_the_oom_names_the_reserved_but_unallocated_memory_and_expandable_segments() -> None:
    d = run(FIXTURES / "cuda-oom-trainer-verl-2828.log")
    assert d.verdict is not None
    assert "6.77 GiB reserved but unallocated" in d.verdict.summary
    remedy = " ".join(d.verdict.remedy)
    assert "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True" in remedy


def test_two_runs_logs_given_together_get_one_verdict_each() -> None:
    from tests.conftest import json_data, run_cli  # noqa: PLC0415

    oom, nccl = FIXTURES / "cuda-oom-trainer-verl-2828.log", FIXTURES / "nccl-timeout-verl-5750.log"
    result = run_cli("diagnose", str(oom), str(nccl))
    assert result.code == 0, result.err
    lines = result.out.splitlines()
    assert lines[0].startswith("diagnose: 2 runs, each on its own")
    assert f"== run 1 of 2: {oom}" in lines
    assert f"== run 2 of 2: {nccl}" in lines
    assert "diagnose: cuda-oom" in lines
    assert "diagnose: nccl-timeout" in lines
    assert "also seen (later failures, or symptoms of the cause above):" not in lines  # no merged story
    data = json_data(run_cli("diagnose", "--json", str(oom), str(nccl)).out)
    assert [(r["paths"], r["class"]) for r in data["runs"]] == [
        ([str(oom)], "cuda-oom"),
        ([str(nccl)], "nccl-timeout"),
    ]


def test_a_folder_of_slurm_outputs_is_one_run_per_job(tmp_path: Path) -> None:
    from tests.conftest import run_cli  # noqa: PLC0415

    (tmp_path / "slurm-101.out").write_bytes((FIXTURES / "cuda-oom-trainer-verl-2828.log").read_bytes())
    (tmp_path / "slurm-102.out").write_bytes((FIXTURES / "nccl-timeout-verl-5750.log").read_bytes())
    result = run_cli("diagnose", str(tmp_path))
    assert result.out.startswith("diagnose: 2 runs")
    assert f"== run 1 of 2: {tmp_path / 'slurm-101.out'}" in result.out


def test_one_ray_session_stays_one_run(tmp_path: Path) -> None:
    from verl_setup.diagnose.runs import split_runs  # noqa: PLC0415

    logs = tmp_path / "session_2026-12-07_01-00-00_1" / "logs"
    logs.mkdir(parents=True)
    a, b = logs / "worker-1.err", logs / "worker-2.err"
    assert split_runs([a, b]) == [[a, b]]
    assert split_runs([a, FIXTURES / "x.log"]) == [[a], [FIXTURES / "x.log"]]
