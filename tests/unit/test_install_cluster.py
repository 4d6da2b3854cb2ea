"""`install --cluster`: the filesystem check, the install on each node, `verify --prefix` on the
installed ones, and the report, with the Ray driver replaced by a stand-in that answers as
scripts/ray_every_node.py does (its RESULT_MARK line) for a two-node cluster; the real driver
runs in tests/integration/test_cluster_ray.py."""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import FIXTURES, run_cli
from verl_setup.cluster import ray_tasks

HEAD = {"node_id": "aaaaaaaaaaaa", "ip": "10.0.0.1"}
WORKER = {"node_id": "bbbbbbbbbbbb", "ip": "10.0.0.2"}


class Driver:
    """What each task would answer: the folder seen on both nodes (or only on the head), the
    install failing on the worker when told to, `verify` passing where it runs."""

    def __init__(self, *, shared: bool, worker_fails: bool) -> None:
        self.shared, self.worker_fails = shared, worker_fails
        self.calls: list[tuple[str, Any, list[str]]] = []

    def __call__(self, argv: list[str], **_: object) -> object:
        function, args, only = argv[3], json.loads(argv[7]), json.loads(argv[8])
        self.calls.append((function, args, only))
        nodes = (
            [HEAD] if only == ["head"] else [n for n in (HEAD, WORKER) if not only or n["node_id"] in only]
        )
        answers = [{**n, "probe": self.probe(function, args, n)} for n in nodes]
        result = {"nodes": answers, "dead": []}
        return types.SimpleNamespace(stdout=ray_tasks.RESULT_MARK + json.dumps(result) + "\n", stderr="")

    def probe(self, function: str, args: list[Any], node: dict[str, str]) -> dict[str, Any]:
        if function == "_fs":
            return {"seen": self.shared or node is HEAD, "fstype": "nfs" if self.shared else "ext4"}
        failed = args[1][0] == "install" and node is WORKER and self.worker_fails
        return {
            "returncode": 4 if failed else 0,
            "error": "uv could not resolve" if failed else None,
            "hostname": f"host-{node['ip'][-1]}",
            "seconds": 12.5,
        }


@pytest.fixture
def cluster_file(tmp_path: Path) -> Path:
    data = json.loads((FIXTURES / "cluster" / "nodes-64.json").read_text())
    names = list(data["nodes"])[:2]
    data["nodes"] = {name: data["nodes"][name] for name in names}
    path = tmp_path / "cluster.json"
    path.write_text(json.dumps(data))
    return path


def install(driver: Driver, monkeypatch: pytest.MonkeyPatch, cluster_file: Path, *flags: str) -> Any:
    monkeypatch.setattr(ray_tasks, "stream", driver)
    monkeypatch.setattr(ray_tasks, "run", driver)
    return run_cli(
        "install", "--cluster", str(cluster_file), "--ray", "127.0.0.1:6379", "--ray-python", sys.executable,
        "--prefix", "/opt/envs/verl", "--installed", *flags,
    )  # fmt: skip


def test_a_shared_prefix_is_installed_once_then_verified_on_every_node(
    monkeypatch: pytest.MonkeyPatch, cluster_file: Path
) -> None:
    driver = Driver(shared=True, worker_fails=False)
    result = install(driver, monkeypatch, cluster_file, "--json")
    assert result.code == 0, result.err
    data = json.loads(result.out)["data"]
    assert (data["ok"], data["prefix"]) == (True, "/opt/envs/verl")
    assert data["filesystem"] == {
        "shared": True, "writer": "aaaaaaaaaaaa", "fstypes": {"aaaaaaaaaaaa": "nfs", "bbbbbbbbbbbb": "nfs"},
        "unseen": [],
    }  # fmt: skip
    assert [n["node_id"] for n in data["nodes"]] == ["aaaaaaaaaaaa"]  # once, on the head
    assert data["verify"]["ok"] is True
    assert [n["node_id"] for n in data["verify"]["nodes"]] == ["aaaaaaaaaaaa", "bbbbbbbbbbbb"]
    [install_call] = [c for c in driver.calls if c[0] == "_install" and c[1][1][0] == "install"]
    assert install_call[1][0] == "installed"
    argv = install_call[1][1]
    assert argv[:3] == ["install", "--prefix", "/opt/envs/verl"]
    assert argv[argv.index("--row") + 1] == data["row"]
    assert argv[argv.index("--python") + 1] == data["python"]
    assert "shared by every node (marker written on aaaaaaaa read on all; nfs)" in result.err
    assert "node host-1 (aaaaaaaa, 10.0.0.1): verified" in result.err


def test_a_node_that_failed_is_exit_4_naming_it_and_only_the_others_are_verified(
    monkeypatch: pytest.MonkeyPatch, cluster_file: Path
) -> None:
    driver = Driver(shared=False, worker_fails=True)
    result = install(driver, monkeypatch, cluster_file)
    assert result.code == 4
    assert result.out == ""
    assert result.err.endswith(
        "verl-setup: error: install failed on 1 of 2 nodes (the others keep their result):\n"
        "  node host-2 (bbbbbbbb, 10.0.0.2): exit 4: uv could not resolve\n"
    )
    assert "node-local (1 node(s) did not see the marker; ext4)" in result.err
    verify_calls = [c for c in driver.calls if c[0] == "_install" and c[1][1][0] == "verify"]
    assert [c[2] for c in verify_calls] == [["aaaaaaaaaaaa"]]  # only the node that installed


def test_json_on_a_failed_node_is_one_envelope_with_the_error_and_each_nodes_result(
    monkeypatch: pytest.MonkeyPatch, cluster_file: Path
) -> None:
    """It was two documents on stdout: an envelope saying "ok": true, then main's error envelope."""
    result = install(Driver(shared=False, worker_fails=True), monkeypatch, cluster_file, "--json")
    assert result.code == 4
    doc = json.loads(result.out)  # one JSON document
    assert (doc["ok"], doc["error"]["code"]) == (False, 4)
    assert doc["error"]["message"].startswith("install failed on 1 of 2 nodes")
    data = doc["data"]
    assert data["ok"] is False
    assert [(n["node_id"], n["ok"]) for n in data["nodes"]] == [
        ("aaaaaaaaaaaa", True),
        ("bbbbbbbbbbbb", False),
    ]
    assert data["verify"] == {
        "ok": True,
        "nodes": [{**HEAD, "hostname": "host-1", "ok": True, "error": None, "seconds": 12.5}],
    }
    assert result.err.count("verl-setup: error: install failed on 1 of 2 nodes") == 1
