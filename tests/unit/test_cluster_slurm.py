"""detect --slurm's gathering, fed srun's real output form: `--label` pieces of at most 1024 bytes."""

from __future__ import annotations

import json
from collections.abc import Sequence

import pytest

from tests.conftest import host
from verl_setup.cluster import slurm as cluster_slurm
from verl_setup.util.runner import Completed, ProgramError


def labelled(task: int, text: str) -> str:
    """How srun --label forwards one task's line: cut every 1024 bytes, each piece labelled."""
    return "".join(f"{task}: {text[i : i + 1024]}\n" for i in range(0, len(text), 1024))


def fake_run(stdout: str, stderr: str = "", code: int = 0) -> object:
    def run(argv: Sequence[str], *, timeout: float, env: object = None) -> Completed:  # noqa: ARG001
        if argv[0] == "scontrol":
            return Completed(argv=tuple(argv), returncode=0, stdout="gpu01\ngpu02\n", stderr="")
        assert "--ntasks-per-node=1" in argv
        assert argv[-1] == "gpu01"  # the head, whose route each node reports
        return Completed(argv=tuple(argv), returncode=code, stdout=stdout, stderr=stderr)

    return run


def line(node: str) -> str:
    facts = json.loads(host(driver="580.95.05", gpus=(("NVIDIA H100 80GB HBM3", "9.0"),) * 8).to_json())
    return json.dumps({"node": node, "hostname": node, "host": facts, "iface_to_head": "ib0"})


def test_pieces_are_joined_and_a_silent_node_is_named_with_sruns_words(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert len(line("gpu01")) > 1024  # the answer really is cut into pieces
    err = "srun: error: gpu02: task 1: Exited with exit code 1\n"
    monkeypatch.setattr(cluster_slurm, "run", fake_run(labelled(0, line("gpu01")), err, 1))
    cluster = cluster_slurm.detect_slurm(
        {"SLURM_JOB_NODELIST": "gpu[01-02]", "SLURM_JOB_ID": "7"}, timeout=30
    )
    (node,) = cluster.nodes
    assert (node.name, node.head, node.iface_to_head) == ("gpu01", True, "ib0")
    (gone,) = cluster.missing
    assert (gone.name, gone.reason) == ("gpu02", "task 1: Exited with exit code 1")
    assert (cluster.how, cluster.address, cluster.tool) == ("slurm", "job 7", "srun")


def test_a_step_that_times_out_keeps_what_came_back(monkeypatch: pytest.MonkeyPatch) -> None:
    def run(argv: Sequence[str], *, timeout: float, env: object = None) -> Completed:  # noqa: ARG001
        if argv[0] == "scontrol":
            return Completed(argv=tuple(argv), returncode=0, stdout="gpu01 gpu02\n", stderr="")
        raise ProgramError("srun: no answer within 30s", stdout=labelled(1, line("gpu02")))

    monkeypatch.setattr(cluster_slurm, "run", run)
    cluster = cluster_slurm.detect_slurm({"SLURM_JOB_NODELIST": "gpu[01-02]"}, timeout=30)
    assert [n.name for n in cluster.nodes] == ["gpu02"]
    assert [(m.name, m.reason) for m in cluster.missing] == [("gpu01", "srun: no answer within 30s")]
