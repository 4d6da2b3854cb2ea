"""render --cluster: the cluster file's node count, GPUs per node, head and interfaces in the files."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import host, run_cli
from verl_setup.host.cluster_file import Cluster, ClusterNode, load_cluster

H100 = ("NVIDIA H100 80GB HBM3", "9.0")


def cluster(tmp_path: Path, gpus: list[int], ifaces: list[str | None]) -> Path:
    nodes = tuple(
        ClusterNode(
            name=f"node{i}id", ip=f"10.0.0.{i + 1}", hostname=f"gpu{i}", head=i == 0,
            host=host(driver="580.95.05", gpus=(H100,) * count), iface_to_head=iface,
        )
        for i, (count, iface) in enumerate(zip(gpus, ifaces, strict=True))
    )  # fmt: skip
    path = tmp_path / "cluster.json"
    path.write_text(Cluster(nodes=nodes, how="ray").to_json(), encoding="utf-8")
    return path


def render(tmp_path: Path, path: Path, *extra: str) -> tuple[str, dict[str, str]]:
    out = tmp_path / "out"
    result = run_cli("render", "slurm", "ray", "--cluster", str(path), "--out", str(out), *extra)
    assert result.code == 0, result.err
    return result.err, {f.name: f.read_text() for f in out.iterdir()}


def test_the_nodes_real_gpus_head_and_interface_reach_sbatch_and_ray_scripts(tmp_path: Path) -> None:
    err, files = render(tmp_path, cluster(tmp_path, [8, 8, 8], ["ens5", "ens5", "ens5"]))
    assert "#SBATCH --nodes=3\n" in files["verl.sbatch"]
    assert "#SBATCH --gpus-per-node=8\n" in files["verl.sbatch"]
    assert "HEAD_IP=${VERL_HEAD_IP:-10.0.0.1}" in files["ray-head.sh"]
    assert "NUM_GPUS=${VERL_NUM_GPUS:-8}" in files["ray-worker.sh"]
    # The scripts source env.sh, so it comes along with the interface every node routes through.
    assert "export NCCL_SOCKET_IFNAME=ens5\n" in files["env.sh"]
    assert "export GLOO_SOCKET_IFNAME=ens5\n" in files["env.sh"]
    assert 'NCCL_SOCKET_IFNAME: "ens5"' in files["runtime_env.yaml"]
    assert "also rendering env.sh" in err


def test_differing_interfaces_and_gpu_counts_are_said_and_rendered_for_all(tmp_path: Path) -> None:
    err, files = render(tmp_path, cluster(tmp_path, [8, 4], ["ens5", "ib0"]))
    assert "#SBATCH --gpus-per-node=4\n" in files["verl.sbatch"]  # the smallest: what every node has
    assert "GPU counts differ between the nodes: rendering 4 per node" in err
    assert "gpu0 (node0id) (8)" in err
    assert "export NCCL_SOCKET_IFNAME=ens5,ib0\n" in files["env.sh"]
    assert "different interfaces (ens5, ib0)" in err


def test_flags_win_over_the_file(tmp_path: Path) -> None:
    path = cluster(tmp_path, [8, 8], ["ens5", "ens5"])
    _, files = render(tmp_path, path, "--iface", "eth1", "--head-ip", "10.9.9.9", "--nodes", "5")
    assert "#SBATCH --nodes=5\n" in files["verl.sbatch"]
    assert "HEAD_IP=${VERL_HEAD_IP:-10.9.9.9}" in files["ray-head.sh"]
    assert "export NCCL_SOCKET_IFNAME=eth1\n" in files["env.sh"]


def test_the_interface_survives_the_file(tmp_path: Path) -> None:
    (node,) = load_cluster(cluster(tmp_path, [1], ["ens5"])).nodes
    assert node.iface_to_head == "ens5"
