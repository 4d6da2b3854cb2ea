"""Rules of the ray, memory and collective checks that read files and values, not a running Ray:
the working_dir upload against Ray's limit, cgroup limits, proxies, and the collective's verdict
on a child report (the child itself runs for real in tests/integration)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import host
from tests.render_scenarios import SCENARIOS, plan_for
from verl_setup.doctor.checks.collective import judge
from verl_setup.doctor.checks.memory import cgroup_limit, meminfo
from verl_setup.doctor.checks.ray_local import auth_token_findings, working_dir_findings
from verl_setup.doctor.context import Context, Options
from verl_setup.doctor.probes.launch_command import parse_launch
from verl_setup.doctor.probes.ray_local import cpu_limit, proxy_without_bypass
from verl_setup.doctor.probes.working_dir import excluded
from verl_setup.matrix.load import load_matrix
from verl_setup.render.templates import RenderOptions, render

MiB = 2**20


def ctx(*launch: str, env: dict[str, str] | None = None) -> Context:
    options = Options(launch=tuple(launch))
    return Context(options=options, env=env or {}, matrix=load_matrix(), host=host())


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A training folder with weights and a checkpoint in it (sparse files: only their size counts)."""
    (tmp_path / "train.py").write_text("print('hi')\n")
    with (tmp_path / "model.safetensors").open("wb") as f:
        f.truncate(600 * MiB)
    (tmp_path / "checkpoints/global_step_10").mkdir(parents=True)
    with (tmp_path / "checkpoints/global_step_10/model.pt").open("wb") as f:
        f.truncate(40 * MiB)
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.usefixtures("project")
def test_a_working_dir_with_weights_is_over_rays_upload_limit() -> None:
    launch = ("ray", "job", "submit", "--working-dir", ".", "--", "python3", "-m", "verl.trainer.main_ppo")
    findings, evidence = working_dir_findings(ctx(*launch))
    (finding,) = findings
    assert finding.status == "fail"
    assert finding.message.startswith("the working_dir upload is 640 MiB, over Ray's 512 MiB limit")
    assert (
        "biggest: model.safetensors (600 MiB), checkpoints/global_step_10/model.pt (40 MiB)"
        in finding.message
    )
    assert evidence[0].source == "--working-dir"


def test_the_rendered_runtime_env_keeps_the_upload_small(project: Path) -> None:
    (cpu,) = [s for s in SCENARIOS if s.name == "cpu"]
    files = {f.name: f.content for f in render(plan_for(cpu), RenderOptions(targets=("ray",)))}
    (project / "runtime_env.yaml").write_text(files["runtime_env.yaml"])
    launch = ("ray", "job", "submit", "--runtime-env", "runtime_env.yaml", "--", "python3", "-m", "x")
    findings, evidence = working_dir_findings(ctx(*launch))
    assert findings == []
    assert evidence[0].value.startswith(f"{project}: 0 MiB after ")
    assert len(yaml.safe_load(files["runtime_env.yaml"])["excludes"]) >= 5


def test_exclude_patterns() -> None:
    assert excluded("a/b/model.safetensors", ["*.safetensors"])
    assert excluded("checkpoints/", ["checkpoints/"])
    assert not excluded("checkpoints", ["checkpoints/"])  # a file of that name stays
    assert excluded(".git/", ["/.git/"])
    assert not excluded("sub/.git/", ["/.git/"])  # anchored at the working_dir's root
    assert excluded(".venv/", ["/.venv/"])


def test_verls_runtime_env_override_is_read_too(project: Path) -> None:
    launch = (
        "python3",
        "-m",
        "verl.trainer.main_ppo",
        f"+ray_kwargs.ray_init.runtime_env.working_dir={project}",
    )
    findings, evidence = working_dir_findings(ctx(*launch))
    assert findings[0].status == "fail"
    assert evidence[0].source == "launch ray_kwargs.ray_init.runtime_env.working_dir"


def test_cgroup_v2_and_v1_limits_from_a_made_tree(tmp_path: Path) -> None:
    (tmp_path / "job/slurm").mkdir(parents=True)
    (tmp_path / "job/slurm/memory.max").write_text("8589934592\n")
    (tmp_path / "job/slurm/cpu.max").write_text("150000 100000\n")
    self_v2 = tmp_path / "self-v2"
    self_v2.write_text("0::/job/slurm\n")
    assert cgroup_limit(tmp_path, self_v2) == (8 * 2**30, str(tmp_path / "job/slurm/memory.max"))
    assert cpu_limit(tmp_path, self_v2).quota == 1.5
    (tmp_path / "memory/docker/abc").mkdir(parents=True)
    (tmp_path / "memory/docker/abc/memory.limit_in_bytes").write_text("9223372036854771712\n")  # unlimited
    self_v1 = tmp_path / "self-v1"
    self_v1.write_text("7:memory:/docker/abc\n")
    assert cgroup_limit(tmp_path, self_v1) == (None, "")


def test_this_machines_meminfo_and_affinity() -> None:
    total, available = meminfo()
    assert total >= available > 0
    assert cpu_limit().affinity == len(os.sched_getaffinity(0))


def test_proxy_rules() -> None:
    env = {"https_proxy": "http://proxy:3128"}
    assert proxy_without_bypass(env, "127.0.0.1") == "https_proxy"
    assert proxy_without_bypass({**env, "no_proxy": "localhost,127.0.0.1"}, "127.0.0.1") is None
    assert proxy_without_bypass({**env, "NO_PROXY": "10.0.0.0/8"}, "10.1.2.3") is None
    assert proxy_without_bypass({**env, "no_proxy": ".cluster.local"}, "head.cluster.local") is None
    assert proxy_without_bypass({}, "127.0.0.1") is None


def test_collective_verdicts_on_a_child_report() -> None:
    c = ctx(env={"NCCL_SOCKET_IFNAME": "eth0"})
    members = [
        {"node_ip": "10.0.0.1", "node": "a" * 20, "env": {}},
        {"node_ip": "10.0.0.2", "node": "b" * 20, "env": {}},
    ]
    results = [{"rank": i, "ok": True, "all_reduce": 3.0, "all_gather": [0.0, 1.0]} for i in range(2)]
    good: dict[str, Any] = {"backend": "gloo", "world": 2, "nodes": 2, "master": "10.0.0.1:29500"}
    good.update(members=members, results=results)
    result = judge(c, good, [])
    assert result.status == "warn"  # NCCL_SOCKET_IFNAME set here, not in the workers
    assert result.findings[0].message == "all-reduce and all-gather over 2 worker(s) agree on every rank"
    assert (
        result.findings[1].message == "NCCL_SOCKET_IFNAME='eth0' here, absent in the Ray workers on 10.0.0.1"
    )
    wrong = dict(good, results=[dict(r, all_reduce=2.0) for r in good["results"]])
    assert judge(c, wrong, []).status == "fail"
    no_torch = {"python": "/x/bin/python", "error": "cannot import torch: No module named 'torch'"}
    assert judge(c, no_torch, []).status == "skip"
    no_cluster = {"python": "/x/bin/python", "init_error": "ConnectionError: could not reach 10.0.0.1:6379"}
    cannot_join = judge(c, no_cluster, [])
    assert cannot_join.status == "fail"
    assert "could not reach 10.0.0.1:6379" in cannot_join.findings[0].message


@pytest.mark.subprocess
@pytest.mark.parametrize("child", ["collective_child.py", "ray_local_child.py"])
def test_a_ray_child_in_an_env_without_ray_answers_one_json_naming_it(child: str) -> None:
    # The children run as scripts in the target env and import their shared set-up as a sibling.
    import subprocess  # noqa: PLC0415

    from verl_setup.doctor.probes import ray_script  # noqa: PLC0415

    bare = [p for p in sorted(Path.home().glob(".pyenv/versions/3.1*/bin/python3")) if p.exists()]
    if not bare:
        pytest.skip("needs an interpreter without Ray (pyenv's)")
    script = Path(ray_script.__file__).with_name(child)
    args = json.dumps({"timeout": 5, "temp_dir": "/tmp", "gpus": 0})  # never reached
    out = subprocess.run(
        [str(bare[0]), str(script), args], capture_output=True, text=True, timeout=60, check=False
    )
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["error"] == "cannot import ray: No module named 'ray'"


def test_launch_without_ray_job_submit_has_no_working_dir() -> None:
    assert working_dir_findings(ctx("python3", "-m", "verl.trainer.main_ppo")) == ([], [])
    assert parse_launch(["python3", "-m", "verl.trainer.main_ppo"]).argv[0] == "python3"


def test_a_left_over_ray_auth_token_is_named(tmp_path: Path) -> None:
    assert auth_token_findings(ctx(env={"HOME": str(tmp_path)})) == []
    (tmp_path / ".ray").mkdir()
    (tmp_path / ".ray/auth_token").write_text("x" * 64)
    (finding,) = auth_token_findings(ctx(env={"HOME": str(tmp_path)}))
    assert finding.message.startswith(f"{tmp_path}/.ray/auth_token exists and RAY_AUTH_MODE is unset")
    assert auth_token_findings(ctx(env={"HOME": str(tmp_path), "RAY_AUTH_MODE": "disabled"})) == []
