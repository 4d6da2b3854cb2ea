"""Rules of the ray, memory and collective checks that read files and values, not a running Ray:
the working_dir upload against Ray's limit, proxies, and the collective's verdict
on a child report (the child itself runs for real in tests/integration)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import host
from tests.render_scenarios import SCENARIOS, plan_for
from verl_setup.doctor.checks.collective import judge
from verl_setup.doctor.checks.ray_local import auth_token_findings, working_dir_findings
from verl_setup.doctor.context import Context, Options
from verl_setup.doctor.probes.launch_command import parse_launch
from verl_setup.doctor.probes.ray_local import proxy_without_bypass
from verl_setup.doctor.probes.working_dir import excluded
from verl_setup.host.resources import meminfo
from verl_setup.matrix.load import load_matrix
from verl_setup.render.templates import RenderOptions, render
from verl_setup.scripts import Script, script_path

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
@pytest.mark.parametrize("child", ["collective", "ray_local"])
def test_a_ray_child_in_an_env_without_ray_answers_one_json_naming_it(child: Script) -> None:
    # The children run as scripts in the target env and import their shared set-up as a sibling.
    import subprocess  # noqa: PLC0415

    bare = [p for p in sorted(Path.home().glob(".pyenv/versions/3.1*/bin/python3")) if p.exists()]
    if not bare:
        pytest.skip("needs an interpreter without Ray (pyenv's)")
    script = script_path(child)
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


def test_ray_gpu_count_honours_cuda_visible_devices() -> None:
    # Census finding 3 (verl#5954): with CUDA_VISIBLE_DEVICES=0,1 on an 8-GPU host the static line
    # said "8 here, 8 wanted"; Ray itself counts the two visible ones.
    from verl_setup.doctor.checks.ray_local import _gpus_here  # noqa: PLC0415  # the rule alone

    facts = host(driver="570.124.06", gpus=(("NVIDIA H100 80GB HBM3", "9.0"),) * 8)
    for mask, have in (("0,1", 2), (None, 8)):
        env = {"PATH": ""} if mask is None else {"PATH": "", "CUDA_VISIBLE_DEVICES": mask}
        ctx = Context(options=Options(), host=facts, env=env, matrix=load_matrix())
        evidence: list[Any] = []
        findings = _gpus_here(ctx, 8, 1, evidence)
        assert evidence[0].value.startswith(f"{have} here")
        assert evidence[0].value.endswith(", 8 wanted")
        assert [f.status for f in findings] == (["fail"] if have < 8 else [])


def test_doctor_uses_the_row_recorded_in_the_env_not_the_first_match(tmp_path: Path) -> None:
    # Census finding 2: verl 0.9.1 + vLLM 0.24.0 match both the FSDP row and its -megatron twin,
    # and the first (FSDP) won, so the TransformerEngine build check was skipped.
    import json  # noqa: PLC0415
    from types import SimpleNamespace  # noqa: PLC0415

    def ctx_for(prefix: Path) -> Context:
        ctx = Context(options=Options(), host=host(), env={"PATH": ""}, matrix=load_matrix())
        target = SimpleNamespace(prefix=str(prefix), dists={"verl": "0.9.1", "vllm": "0.24.0"})
        ctx.__dict__["target"] = (target, "")  # the probe's answer, without running an interpreter
        return ctx

    row, why = ctx_for(tmp_path).row
    assert row is not None
    assert row.id == "verl0.9-vllm0.24.0"
    assert "matches the installed" in why
    manifest = {"schema": 1, "row": {"id": "verl0.9-vllm0.24.0-megatron", "sha256": "x"}}
    (tmp_path / "verl-setup.json").write_text(json.dumps(manifest))
    row, why = ctx_for(tmp_path).row
    assert row is not None
    assert row.id == "verl0.9-vllm0.24.0-megatron"
    assert "verl-setup.json" in why
    (tmp_path / "verl-setup.json").write_text('{"row": {"id": "no-such-row"}}')
    row, why = ctx_for(tmp_path).row
    assert row is not None
    assert row.id == "verl0.9-vllm0.24.0"
    assert "no-such-row" in why


@pytest.mark.parametrize(
    ("vllm", "env", "status", "says"),
    [
        ("0.8.5", {"VLLM_ATTENTION_BACKEND": "XFORMERS"}, "warn", "does not work with vllm 0.8.5"),
        ("0.8.5", {"VLLM_ATTENTION_BACKEND": "xformers"}, "warn", "V1 engine"),
        ("0.7.3", {"VLLM_ATTENTION_BACKEND": "XFORMERS"}, "pass", "suit the engine"),
        ("0.24.0", {"VLLM_ATTENTION_BACKEND": "XFORMERS"}, "pass", "not verified"),
        ("0.8.5", {"VLLM_ATTENTION_BACKEND": "FLASH_ATTN"}, "pass", "no engine variable"),
        ("0.8.5", {}, "pass", "no engine variable"),
    ],
    ids=["xformers-0.8.5", "lower-case", "xformers-0.7.3", "xformers-0.24-unverified", "flash-attn", "unset"],
)
def test_engine_variables_the_installed_engine_rejects(
    vllm: str, env: dict[str, str], status: str, says: str
) -> None:
    # verl#940: VLLM_ATTENTION_BACKEND=XFORMERS from verl's vLLM 0.6/0.7 examples, with vLLM 0.8.
    from types import SimpleNamespace  # noqa: PLC0415

    from verl_setup.doctor.checks.engine_env import check_engine_env  # noqa: PLC0415
    from verl_setup.doctor.result import report_text  # noqa: PLC0415

    ctx = Context(options=Options(), host=host(), env={"PATH": "", **env}, matrix=load_matrix())
    ctx.__dict__["target"] = (SimpleNamespace(prefix="/env", dists={"verl": "0.4.1", "vllm": vllm}), "")
    result = check_engine_env(ctx)
    assert result.status == status
    assert says in report_text([result]) + " ".join(f.message for f in result.findings)


def test_the_engine_variable_table_rejects_a_bad_entry(tmp_path: Path) -> None:
    from verl_setup.errors import BadInputError  # noqa: PLC0415
    from verl_setup.matrix.engine_env import engine_env_path, load_engine_env  # noqa: PLC0415

    assert load_engine_env().variables[0].name == "VLLM_ATTENTION_BACKEND"
    bad = tmp_path / "engine_env.yaml"
    bad.write_text(engine_env_path().read_text().replace('rejects: ">=0.8,<0.10"', 'rejects: "0.8 and up"'))
    with pytest.raises(BadInputError, match="rejects"):
        load_engine_env(bad)


def test_sized_all_gather_verdicts_against_the_timeout() -> None:
    from verl_setup.doctor.checks.collective.sized import judge_sized  # noqa: PLC0415

    numel = 823186976  # verl#5750's NumelOut
    ranks = [{"rank": 0, "sized_seconds": 12.0}, {"rank": 1, "sized_seconds": 20.0}]
    (ok,) = judge_sized(ranks, numel, 600)
    assert ok.status == "pass"
    assert ok.message == (
        "an all-gather of 823186976 elements (1.65 GB in bf16) took 20.00 s on the slowest of 2 rank(s): "
        "3.3% of actor_rollout_ref.nccl_timeout=600 s"
    )
    (slow,) = judge_sized(ranks, numel, 30)
    assert slow.status == "warn"
    assert "slow but healthy" in slow.message
    (over,) = judge_sized(ranks, numel, 15)
    assert over.status == "fail"
    assert "above 40 s" in (over.remedy or "")
    (broken,) = judge_sized([{"rank": 0, "sized_error": "RuntimeError: timed out"}], numel, 600)
    assert broken.status == "fail"
    assert "timed out" in broken.message


def test_a_32b_untied_model_loads_once_per_node_and_offload_is_counted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Census finding 6 (verl#1964: 32B, 400 GB host, trained 200 steps): the loading estimate was
    # model x 8 workers = 488 GiB, a FAIL. verl 0.9.1 loads the HF weights in rank 0 only when the
    # model does not tie its embeddings; the others start on meta tensors.
    import json  # noqa: PLC0415

    from verl_setup.doctor.checks import memory  # noqa: PLC0415

    model = tmp_path / "Qwen2.5-32B"
    model.mkdir()
    (model / "config.json").write_text(
        json.dumps({"tie_word_embeddings": False, "torch_dtype": "bfloat16", "num_hidden_layers": 64})
    )
    (model / "model.safetensors.index.json").write_text(json.dumps({"metadata": {"total_size": 61 * 2**30}}))
    meminfo_file = tmp_path / "meminfo"
    meminfo_file.write_text("MemTotal:       390594560 kB\nMemAvailable:   380000000 kB\n")
    monkeypatch.setattr(memory, "meminfo", lambda: meminfo(meminfo_file))  # the thread's 400 GB
    monkeypatch.setattr(memory, "cgroup_limit", lambda: (None, ""))

    def run_memory(*extra: str) -> tuple[str, str, list[str]]:
        launch = ("python3", "-m", "verl.trainer.main_ppo", f"actor_rollout_ref.model.path={model}",
                  "trainer.n_gpus_per_node=8", "trainer.nnodes=1", *extra)  # fmt: skip
        ctx = Context(options=Options(launch=launch), host=host(), env={"PATH": ""}, matrix=load_matrix())
        result = memory.check_memory(ctx)
        estimates = next(e.value for e in result.evidence if e.name == "estimates")
        return result.status, estimates, [f.message for f in result.findings if f.status != "pass"]

    _status, estimates, problems = run_memory()
    assert estimates.startswith("loading 61.0 GiB (model x 1: rank 0 only: tie_word_embeddings=false")
    assert not [p for p in problems if "colocated workers loading" in p]
    assert any("a checkpoint save needs about 427.0 GiB" in p for p in problems)  # the thread's real OOM
    _status, estimates, problems = run_memory(
        "actor_rollout_ref.actor.fsdp_config.param_offload=True",
        "actor_rollout_ref.actor.fsdp_config.optimizer_offload=True",
    )
    assert (
        "offloaded state 366.0 GiB (param_offload 2x + optimizer_offload 4x the model over 1 node(s))"
        in estimates
    )
    assert any("colocated workers loading" in p and "0.95 of host RAM" in p for p in problems)


def test_the_gpu_side_estimate_names_its_formula_and_a_kv_cache_that_cannot_fit(tmp_path: Path) -> None:
    import json  # noqa: PLC0415

    from verl_setup.doctor.checks.memory.gpu import gpu_estimates  # noqa: PLC0415

    model = tmp_path / "Qwen2.5-7B-Instruct"  # its config.json's shape figures
    model.mkdir()
    (model / "config.json").write_text(json.dumps({
        "num_hidden_layers": 28, "num_attention_heads": 28, "num_key_value_heads": 4, "hidden_size": 3584,
        "vocab_size": 152064, "torch_dtype": "bfloat16", "tie_word_embeddings": False,
    }))  # fmt: skip
    (model / "model.safetensors.index.json").write_text(json.dumps({"metadata": {"total_size": 60 * GIB_}}))
    facts = host(driver="570.124.06", gpus=(("NVIDIA H100 80GB HBM3", "9.0"),))  # 81559 MiB

    def estimate(*extra: str) -> tuple[list[Any], dict[str, str]]:
        launch = ("python3", "-m", "verl.trainer.main_ppo", f"actor_rollout_ref.model.path={model}", *extra)
        ctx = Context(options=Options(launch=launch), host=facts, env={"PATH": ""}, matrix=load_matrix())
        evidence: list[Any] = []
        findings = gpu_estimates(ctx, evidence)
        return findings, {e.name: e.value for e in evidence}

    findings, ev = estimate("actor_rollout_ref.rollout.tensor_model_parallel_size=1")
    assert [f.status for f in findings] == ["fail"]
    assert "No available memory for the cache blocks" in findings[0].message
    findings, ev = estimate(
        "actor_rollout_ref.rollout.tensor_model_parallel_size=2",
        "actor_rollout_ref.rollout.gpu_memory_utilization=0.6",
        "data.max_prompt_length=1024", "data.max_response_length=3072",
        "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4",
    )  # fmt: skip
    assert findings == []
    assert ev["GPU estimate (rollout)"].startswith(
        "weights 30.0 GiB per GPU (weights / TP 2); KV room 17.8 GiB"
    )
    assert (
        "one 4096-token sequence's KV 112 MiB (2 x 28 layers x 2 KV heads x 128 x 2 B x 4096)"
        in ev["GPU estimate (rollout)"]
    )
    assert ev["GPU estimate (trainer)"].startswith(
        "logits 9.3 GiB per micro-batch (ppo_micro_batch_size_per_gpu 4"
    )


GIB_ = 1024**3
