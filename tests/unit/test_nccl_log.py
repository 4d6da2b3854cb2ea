"""doctor's NCCL log classifier on real NCCL_DEBUG=INFO logs from public issues (tests/fixtures/nccl)."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import FIXTURES
from verl_setup.doctor.probes import nccl_log
from verl_setup.doctor.probes.network import route_interface

NCCL = FIXTURES / "nccl"


def causes(name: str, **kwargs: object) -> dict[str, nccl_log.NcclCause]:
    text = (NCCL / name).read_text(encoding="utf-8")
    return {d.cause: d for d in nccl_log.classify(text, **kwargs)}  # type: ignore[arg-type]


def test_link_local_interface_is_named_with_its_line() -> None:
    found = causes("link-local-nccl-529.log")
    assert "fe80::e866:19ff:fe1e:a688%ip6tnl0" in found["link-local"].line
    assert "NCCL_SOCKET_IFNAME" in found["link-local"].remedy
    assert "plugin" in found  # that log also shows NCCL without a net plugin
    assert "loopback" not in found


def test_loopback_interface_among_the_chosen_ones() -> None:
    found = causes("loopback-horovod-789.log")
    assert "lo:127.0.0.1" in found["loopback"].line
    assert nccl_log.chosen_interfaces((NCCL / "loopback-horovod-789.log").read_text()) == {
        "eth0": "3.5.6.12",
        "lo": "127.0.0.1",
    }


def test_connect_timeout_of_an_old_nccl() -> None:
    found = causes("connect-timeout-nccl-tests-15.log")
    assert set(found) == {"timeout"}
    assert "Connection timed out" in found["timeout"].line


def test_plugin_on_some_nodes_only_names_both_sides() -> None:
    found = causes("plugin-on-some-nodes-nccl-1634.log")
    remedy = found["plugin"].remedy
    assert "loads on HGX-H100-04 but not on HGX-H100-11" in remedy


def test_p2p_disabled_between_gpus() -> None:
    found = causes("p2p-disabled-vllm-11139.log")
    assert "NCCL_P2P_DISABLE=1" in found["p2p"].remedy
    assert "P2P is disabled between connected GPUs 1 and 0" in found["p2p"].line
    assert "loopback" not in found  # eth0 10.0.143.175 is fine
    assert "link-local" not in found


def test_variables_in_the_shell_but_not_in_the_workers() -> None:
    text = (NCCL / "ifname-set-aws-ofi-nccl-715.log").read_text()
    assert nccl_log.variables_seen(text) == {"NCCL_SOCKET_IFNAME": "eth0"}
    # The worker got NCCL_SOCKET_IFNAME; NCCL_IB_HCA from this shell never reached it.
    found = causes(
        "ifname-set-aws-ofi-nccl-715.log",
        shell_env={"NCCL_SOCKET_IFNAME": "eth0", "NCCL_IB_HCA": "mlx5_0", "PATH": "/bin"},
    )
    assert list(found) == ["variables"]
    assert found["variables"].line == "NCCL_IB_HCA='mlx5_0' here, absent in the NCCL log"


def test_interface_kinds() -> None:
    assert nccl_log.interface_kind("docker0", "172.17.0.1") == "container-bridge"
    assert nccl_log.interface_kind("ens5", "169.254.0.1") == "link-local"
    assert nccl_log.interface_kind("eth0", "10.0.0.2") is None


def test_route_to_the_head_from_a_recorded_route_table() -> None:
    table = FIXTURES / "doctor" / "proc-net-route.txt"  # this machine's /proc/net/route
    assert route_interface("192.0.2.7", table) == "eth0"  # the on-link /24
    assert route_interface("203.0.113.9", table) == "eth0"  # the default route
    assert route_interface("127.0.0.1", table) == "lo"
    assert route_interface("10.1.1.1", Path("/nonexistent")) is None


def test_verl_726s_own_connect_line_names_the_link_local_address() -> None:
    # Census finding 4: only `Using` lines were read, so this line gave "no cause named".
    line = (FIXTURES / "diagnose" / "nccl-connect-verl-726.log").read_text(encoding="utf-8")
    found = {d.cause: d for d in nccl_log.classify(line)}
    assert set(found) == {"link-local"}
    assert "169.254.0.1" in found["link-local"].remedy
    assert "NCCL_SOCKET_IFNAME" in found["link-local"].remedy


def test_connect_lines_by_address_class() -> None:
    assert nccl_log.address_kind("127.0.0.1") == "loopback"
    assert nccl_log.address_kind("fe80::966d:ae03:a2:8cf0%ib1") == "link-local"
    assert nccl_log.address_kind("172.17.0.3") == "container-bridge"
    routable = nccl_log.classify(
        (FIXTURES / "diagnose" / "nccl-connect-routable-nccl-tests-166.log").read_text()
    )
    assert [d.cause for d in routable] == ["unreachable", "timeout"]
