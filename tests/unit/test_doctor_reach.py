"""issue 32, item 8: `doctor --check collective --ray-address` at a port where nothing listens
fails in seconds with the cause (it waited 105 s, then offered an NCCL remedy)."""

from __future__ import annotations

import socket
import sys
import time

import pytest

from tests.conftest import json_data, run_cli
from verl_setup.doctor.probes.reach import host_port, unreachable


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize(
    ("address", "expected"),
    [
        ("10.0.0.1:6379", ("10.0.0.1", 6379)),
        ("ray://head:10001", ("head", 10001)),
        ("http://127.0.0.1:8265", ("127.0.0.1", 8265)),
        ("head-without-port", None),
    ],
)
def test_the_address_forms_ray_takes(address: str, expected: tuple[str, int] | None) -> None:
    assert host_port(address) == expected


def test_a_listening_port_is_reachable() -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        assert unreachable(f"127.0.0.1:{server.getsockname()[1]}") is None


@pytest.mark.subprocess  # the env probe runs the interpreter; nothing else starts
def test_the_collective_at_a_dead_port_fails_in_seconds_naming_the_address() -> None:
    port = closed_port()
    started = time.monotonic()
    result = run_cli(
        "doctor",
        "--json",
        "--prefix",
        sys.prefix,
        "--check",
        "collective",
        "--ray-address",
        f"127.0.0.1:{port}",
    )
    seconds = time.monotonic() - started
    (check,) = json_data(result.out)["checks"]
    assert result.code == 5
    assert check["status"] == "fail"
    assert check["summary"] == (
        f"no Ray head at 127.0.0.1:{port}: connection refused at 127.0.0.1:{port}: nothing listens there"
    )
    assert "ray start --head" in check["remedy"]
    assert "NCCL" not in check["remedy"]
    assert seconds < 10, seconds
