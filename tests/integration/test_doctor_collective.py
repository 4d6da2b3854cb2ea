"""doctor collective: a real gloo all-reduce and all-gather across two Ray nodes on this machine.

One passes; one is made to fail (the rendezvous port is taken); one shows NCCL/GLOO variables
that this shell has and the workers, started by `ray start` without them, lack.
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import json_data, run_cli
from tests.integration.cluster_env import Cluster, start_cluster, stop_cluster, torch_venv
from tests.integration.test_doctor_ray import hard_limit
from verl_setup.doctor.checks import collective

pytestmark = [pytest.mark.slow, pytest.mark.serial, pytest.mark.network]

# Above the check's own hard timeout (its child is killed at 105 s), so that timeout is what a hang
# meets; 60 s, as the other Ray tests have, failed a passing run on a loaded machine (CI, 2026-12-01).
TEST_LIMIT = 150


@pytest.fixture(autouse=True)
def _hard_limit() -> Iterator[None]:
    with hard_limit(TEST_LIMIT):
        yield


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    started = start_cluster(torch_venv(), 6600)  # test_verify owns 6500-6599
    try:
        yield started
    finally:
        stop_cluster(started)


def doctor_sized(
    monkeypatch: pytest.MonkeyPatch, cluster: Cluster, numel: int, *launch: str
) -> tuple[int, dict[str, Any]]:
    return doctor(monkeypatch, cluster, *launch, flags=("--bucket-numel", str(numel)))


def doctor(
    monkeypatch: pytest.MonkeyPatch, cluster: Cluster, *launch: str, flags: tuple[str, ...] = (), **env: str
) -> tuple[int, dict[str, Any]]:
    for name in [n for n in os.environ if n.startswith(("RAY_", "NCCL_", "GLOO_", "MASTER_"))]:
        monkeypatch.delenv(name)
    monkeypatch.delenv("VIRTUAL_ENV", raising=False)
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    result = run_cli(
        "doctor", "--json", "--check", "collective", "--prefix", str(cluster.venv),
        "--ray-address", cluster.address, *flags, *(("--", *launch) if launch else ()),
    )  # fmt: skip
    assert result.err == "", result.err
    check = json_data(result.out)["checks"][0]
    print(json.dumps(check, indent=1))  # the report quotes this output per census row
    return result.code, check


def test_gloo_all_reduce_and_all_gather_pass_across_two_nodes(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    code, check = doctor(monkeypatch, cluster)
    assert check["status"] == "pass", check
    evidence = {e["name"]: e for e in check["evidence"]}
    assert evidence["group"]["value"].startswith("gloo over 2 worker(s) on 2 node(s), rendezvous ")
    assert evidence["rank 0"]["value"].startswith("ok in ")
    assert evidence["rank 1"]["value"].startswith("ok in ")
    assert evidence["rank 0"]["source"] != evidence["rank 1"]["source"]  # one worker on each node
    assert check["summary"] == "all-reduce and all-gather over 2 worker(s) agree on every rank"
    assert code == 0


def test_variables_and_paths_the_workers_lack_are_named(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    missing = "/nonexistent/verl-setup-test/model"
    code, check = doctor(
        monkeypatch, cluster, "python3", "-m", "verl.trainer.main_ppo",
        f"actor_rollout_ref.model.path={missing}",
        GLOO_SOCKET_IFNAME="lo", NCCL_SOCKET_IFNAME="lo",
    )  # fmt: skip
    ip = next(e["source"] for e in check["evidence"] if e["name"] == "rank 0").split()[2]
    warned = [f["message"] for f in check["findings"] if f["status"] == "warn"]
    assert f"GLOO_SOCKET_IFNAME='lo' here, absent in the Ray workers on {ip}" in warned
    assert f"NCCL_SOCKET_IFNAME='lo' here, absent in the Ray workers on {ip}" in warned
    assert "before `ray start` on every node" in check["remedy"]
    # The model path is looked up by a worker on each node: both nodes are named.
    (blind,) = [f["message"] for f in check["findings"] if f["status"] == "fail"]
    assert blind.startswith(f"{missing} does not exist for the Ray workers on {ip} (node ")
    assert blind.count("(node ") == 2
    assert check["status"] == "fail"
    assert code == 5


def test_a_taken_rendezvous_port_fails_the_collective(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(collective, "GROUP_TIMEOUT", 8.0)
    blocker = socket.socket()
    blocker.bind(("0.0.0.0", 0))  # noqa: S104  # the port torch's store would bind on every interface
    blocker.listen(8)  # accepts, never answers
    port = blocker.getsockname()[1]
    try:
        code, check = doctor(monkeypatch, cluster, MASTER_PORT=str(port))
    finally:
        blocker.close()
    assert check["status"] == "fail", check
    taken = [f for f in check["findings"] if "rendezvous port" in f["message"]]
    assert taken, check["findings"]
    assert f":{port} is taken" in taken[0]["message"]
    assert "EADDRINUSE" in taken[0]["message"] or "address already in use" in taken[0]["message"]
    assert code == 5


def test_a_sized_all_gather_is_timed_against_nccl_timeout(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    # verl#5750's bucket was 823186976 bf16 elements; 5e7 (100 MB per gather) keeps this test
    # within this machine's memory, on the same code path. A 1 s timeout makes the same gather slow.
    numel = 50_000_000
    code, check = doctor_sized(monkeypatch, cluster, numel)
    sized = [f for f in check["findings"] if f["message"].startswith(f"an all-gather of {numel} elements")]
    assert len(sized) == 1, check
    assert "0.10 GB in bf16" in sized[0]["message"]
    assert "of actor_rollout_ref.nccl_timeout=600 s" in sized[0]["message"]
    assert sized[0]["status"] == "pass"
    evidence = {e["name"]: e for e in check["evidence"]}
    assert evidence["bucket"]["source"] == "--bucket-numel"
    assert code == 0
    code, check = doctor_sized(
        monkeypatch, cluster, numel, "python3", "-m", "verl.trainer.main_ppo",
        "actor_rollout_ref.nccl_timeout=0.001",
    )  # fmt: skip
    messages = " ".join(f["message"] for f in check["findings"])
    assert (
        "of actor_rollout_ref.nccl_timeout=0.001 s" in messages
        or "sized all-gather did not finish" in messages
    )
    assert check["status"] == "fail"
