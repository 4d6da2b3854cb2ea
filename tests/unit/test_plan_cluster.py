"""plan --cluster: one row for every node, the nodes that hold it back, what differs between them."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import FIXTURES, host, json_data, run_cli
from verl_setup.host.cluster_file import Cluster, ClusterNode, MissingNode, load_cluster
from verl_setup.host.facts import HostFacts
from verl_setup.matrix.load import load_matrix

H100 = (("NVIDIA H100 80GB HBM3", "9.0"),) * 8
NODES_64 = FIXTURES / "cluster" / "nodes-64.json"


def cluster_file(tmp_path: Path, hosts: list[HostFacts], missing: tuple[MissingNode, ...] = ()) -> Path:
    nodes = tuple(
        ClusterNode(name=f"node{i}id", ip=f"10.0.0.{i + 1}", hostname=f"gpu{i}", head=i == 0, host=h)
        for i, h in enumerate(hosts)
    )
    path = tmp_path / "cluster.json"
    path.write_text(Cluster(nodes=nodes, missing=missing, how="ray").to_json(), encoding="utf-8")
    return path


def one_535_among_580s(tmp_path: Path) -> Path:
    hosts = [host(driver="535.129.03" if i == 2 else "580.95.05", gpus=H100) for i in range(4)]
    return cluster_file(tmp_path, hosts)


def test_a_535_node_among_580s_gets_the_cuda_12_8_row_for_all_or_its_driver_upgraded(tmp_path: Path) -> None:
    path = one_535_among_580s(tmp_path)
    result = run_cli("plan", "--cluster", str(path), "--json")
    assert result.code == 0, result.err
    data = json_data(result.out)
    matrix = load_matrix()
    assert matrix.row(data["row"]["id"]).requires.cuda == "12.8"
    alone = {n["own_row"] for name, n in data["cluster"]["nodes"].items() if name != "node2id"}
    assert len(alone) == 1
    (preferred,) = alone
    assert matrix.row(preferred).requires.cuda == "13.0"  # what the 580 nodes would get alone
    (held,) = data["cluster"]["held_back"]
    assert held["id"] == preferred
    assert held["picked_by"] == ["gpu0 (node0id)", "gpu1 (node1id)", "gpu3 (node3id)"]
    (blocker,) = held["blockers"]
    assert blocker["nodes"] == ["gpu2 (node2id)"]
    assert blocker["change"] == "upgrade the node's NVIDIA driver to >= 580.65.06"
    text = run_cli("plan", "--cluster", str(path)).out
    assert f"held back  {preferred}" in text
    assert "node gpu2 (node2id): upgrade the node's NVIDIA driver to >= 580.65.06" in text
    assert f"or keep {data['row']['id']} for all 4 nodes" in text
    # The minor-version-compatibility warning is the 535 node's alone, and says so.
    assert any(
        w.startswith("node gpu2 (node2id): driver 535.129.03 runs CUDA 12.8") for w in data["warnings"]
    )


def test_the_same_row_on_every_node_holds_nothing_back(tmp_path: Path) -> None:
    path = cluster_file(tmp_path, [host(driver="580.95.05", gpus=H100) for _ in range(3)])
    data = json_data(run_cli("plan", "--cluster", str(path), "--json").out)
    assert data["row"]["id"] == "verl0.9-vllm0.24.0"  # what test_select picks for one such host
    assert data["cluster"]["held_back"] == []
    assert data["cluster"]["differences"] == []


def test_no_row_for_all_names_the_blocking_node_and_its_change(tmp_path: Path) -> None:
    path = one_535_among_580s(tmp_path)
    result = run_cli("plan", "--cluster", str(path), "--policy", "strict")
    assert result.code == 3
    assert result.err.count("\n") == 1
    assert "no matrix row fits all 4 nodes" in result.err
    assert "blocked by node gpu2 (node2id)" in result.err
    assert "upgrade the node's NVIDIA driver to >= " in result.err
    assert "gpu0" not in result.err  # the 580 nodes block nothing


def test_a_gpu_node_among_cpu_nodes_blocks_the_cpu_row_unless_no_engine_is_asked(tmp_path: Path) -> None:
    path = cluster_file(tmp_path, [host(), host(), host(driver="580.95.05", gpus=H100)])
    result = run_cli("plan", "--cluster", str(path))
    assert result.code == 3
    assert "cpu is blocked by node gpu2 (node2id) (CPU-only development row" in result.err
    assert "nodes gpu0 (node0id), gpu1 (node1id) (needs an NVIDIA GPU" in result.err
    data = json_data(run_cli("plan", "--cluster", str(path), "--engine", "none", "--json").out)
    assert data["row"]["id"] == "cpu"


def test_64_recorded_nodes_name_each_difference_that_breaks_ray() -> None:
    data = json_data(run_cli("plan", "--cluster", str(NODES_64), "--json").out)
    assert len(data["cluster"]["nodes"]) == 64
    found = {d["what"]: d["values"] for d in data["cluster"]["differences"]}
    assert set(found) == {
        "Python 3.12 on the nodes",
        "ray on PATH",
        "CUDA_VISIBLE_DEVICES",
        "HF_HOME",
        "NCCL_SOCKET_IFNAME",
    }
    assert found["ray on PATH"][1] == {"value": "2.49.0", "nodes": ["gpu050 (32323232)"]}
    assert found["Python 3.12 on the nodes"][1]["nodes"] == ["gpu021 (15151515)", "gpu022 (16161616)"]
    assert [v["value"] for v in found["NCCL_SOCKET_IFNAME"]] == ["eth0", "ib0", "unset"]
    (held,) = data["cluster"]["held_back"]
    assert held["blockers"][0]["nodes"] == ["gpu061 (3d3d3d3d)", "gpu062 (3e3e3e3e)", "gpu063 (3f3f3f3f)"]


def test_missing_nodes_are_named_in_the_plan(tmp_path: Path) -> None:
    gone = (MissingNode(name="deadbeef", ip="10.0.0.9", reason="no answer within 30s"),)
    path = cluster_file(tmp_path, [host(), host()], missing=gone)
    data = json_data(run_cli("plan", "--cluster", str(path), "--json").out)
    assert data["cluster"]["missing"] == {"deadbeef": {"ip": "10.0.0.9", "reason": "no answer within 30s"}}
    assert "node deadbeef (10.0.0.9) gave no facts: no answer within 30s" in data["warnings"]
    assert load_cluster(path).missing == gone


@pytest.mark.parametrize(
    "flags", [("--driver", "580.95.05"), ("--gpu", "H100"), ("--no-gpu",), ("--host", "x.json")]
)
def test_flags_that_describe_one_machine_are_refused(tmp_path: Path, flags: tuple[str, ...]) -> None:
    path = cluster_file(tmp_path, [host()])
    result = run_cli("plan", "--cluster", str(path), *flags)
    assert result.code == 2
    assert f"{flags[0]} describes one machine" in result.err


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("{", "is not JSON we can use"),
        ('{"schema": 1}', "not a cluster file"),
        ('{"schema": 2, "kind": "verl-setup-cluster"}', "schema 2 is not 1"),
        ('{"schema": 1, "kind": "verl-setup-cluster", "gathered": {}, "nodes": {}}', "no node answered"),
        ('{"schema": 1, "kind": "verl-setup-cluster", "gathered": {}, "nodes": {"a": 3}}', "node 'a'"),
        (
            '{"schema": 1, "kind": "verl-setup-cluster", "gathered": {}, '
            '"nodes": {"a": {"host": {"schema": 1}}}}',
            "cluster.json#a: top level: missing key 'os'",
        ),
        ('{"schema": 1, "kind": "verl-setup-cluster", "gathered": {"how": 5}, "nodes": {}}', "gathered.how"),
    ],
)
def test_a_bad_cluster_file_is_one_line_exit_2(tmp_path: Path, text: str, words: str) -> None:
    path = tmp_path / "cluster.json"
    path.write_text(text, encoding="utf-8")
    result = run_cli("plan", "--cluster", str(path))
    assert result.code == 2, result.err
    assert words in result.err
    assert result.err.count("\n") == 1


def test_a_fifo_is_refused_at_once(tmp_path: Path) -> None:
    import os  # noqa: PLC0415

    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    result = run_cli("plan", "--cluster", str(fifo))
    assert result.code == 2
    assert "regular file" in result.err or "not a regular" in result.err
