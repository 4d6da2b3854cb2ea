"""The smoke run's launch: main_ppo's overrides and environment on the CPU path and the GPU path."""

from __future__ import annotations

from pathlib import Path

import pytest

from verl_setup.smoke import launch
from verl_setup.smoke.ray import PORT_FLAGS, QUIET, free_ports, start_argv

WORK = Path("/tmp/run")


def settings(**kw: object) -> launch.Settings:
    base: dict[str, object] = {
        "python": Path("/env/bin/python"),
        "verl": "0.9.1",
        "work": WORK,
        "model": WORK / "model",
    }
    base.update(kw)
    return launch.Settings(**base)  # type: ignore[arg-type]  # test helper: keywords checked by the class


def keys(overrides: tuple[str, ...] | list[str]) -> dict[str, str]:
    return dict(o.lstrip("+").split("=", 1) for o in overrides)


def test_cpu_launch_runs_main_ppo_with_the_cpu_platform_and_the_hf_rollout() -> None:
    plan = launch.build(settings(), "127.0.0.1:6380")
    assert plan.argv[:3] == ["/env/bin/python", "-m", "verl.trainer.main_ppo"]
    o = keys(plan.overrides)
    assert o["trainer.device"] == "cpu"
    assert o["actor_rollout_ref.rollout.name"] == "hf"
    assert o["trainer.n_gpus_per_node"] == "1"
    assert o["actor_rollout_ref.model.override_config.attn_implementation"] == "sdpa"
    assert o["actor_rollout_ref.model.use_remove_padding"] == "false"
    assert o["actor_rollout_ref.actor.strategy"] == "fsdp2"
    assert o["trainer.total_training_steps"] == "2"
    assert o["trainer.save_freq"] == "2"
    assert o["actor_rollout_ref.actor.checkpoint.save_contents"] == "[model,optimizer,extra,hf_model]"
    assert o["transfer_queue.backend.SimpleStorage.num_data_storage_units"] == "1"
    assert o["actor_rollout_ref.rollout.agent.num_workers"] == "1"
    assert o["reward.num_workers"] == "1"
    assert o["actor_rollout_ref.rollout.calculate_log_probs"] == "true"
    assert o["trainer.default_local_dir"] == str(WORK / "checkpoints")
    assert Path(o["reward.custom_reward_function.path"]).is_file()
    assert plan.env["VERL_PLATFORM"] == "cpu"
    assert plan.env["VERL_ENGINE_DEVICE"] == "cuda"
    assert plan.env["RAY_ADDRESS"] == "127.0.0.1:6380"
    assert plan.env["VERL_USE_EXTERNAL_MODULES"] == "verl_smoke_cpu_platform,verl_smoke_hf_rollout"
    folder = Path(plan.env["PYTHONPATH"].split(":")[0])
    assert folder.name == "v0_9"
    assert all((folder / f"{m}.py").is_file() for m in launch.MODULES)


def test_every_override_is_one_hydra_token_without_shell_quotes() -> None:
    # main_ppo gets argv directly: a quote would reach Hydra's parser (LexerNoViableAltException)
    for o in launch.build(settings(), "127.0.0.1:6380").overrides:
        assert "'" not in o
        assert '"' not in o
        assert " " not in o


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_gpu_launch_uses_the_rows_engine_on_every_gpu_and_no_cpu_module(engine: str) -> None:
    plan = launch.build(settings(gpus=4, engine=engine, flash_attn=True), "127.0.0.1:6380")
    o = keys(plan.overrides)
    assert o["trainer.device"] == "cuda"
    assert o["trainer.n_gpus_per_node"] == "4"
    assert o["actor_rollout_ref.rollout.name"] == engine
    assert "actor_rollout_ref.model.override_config.attn_implementation" not in o  # verl's defaults
    assert "VERL_PLATFORM" not in plan.env
    assert "VERL_USE_EXTERNAL_MODULES" not in plan.env
    assert "PYTHONPATH" not in plan.env


def test_gpu_launch_of_an_env_without_flash_attn_asks_for_sdpa() -> None:
    o = keys(launch.build(settings(gpus=1, engine="vllm", flash_attn=False), "a:1").overrides)
    assert o["actor_rollout_ref.model.override_config.attn_implementation"] == "sdpa"
    assert o["actor_rollout_ref.model.use_remove_padding"] == "false"


def test_storage_units_reach_the_transfer_queue_override() -> None:
    o = keys(launch.build(settings(storage_units=8), "a:1").overrides)
    assert o["transfer_queue.backend.SimpleStorage.num_data_storage_units"] == "8"


@pytest.mark.parametrize("verl", ["0.8.2", "0.10.0.dev0", "0.4.1"])
def test_a_verl_minor_without_cpu_modules_is_refused_by_name(verl: str) -> None:
    with pytest.raises(launch.NoModuleLineError, match=r"kept for verl 0\.9"):
        launch.module_line(verl)
    with pytest.raises(launch.NoModuleLineError):
        launch.build(settings(verl=verl), "a:1")


def test_the_private_ray_has_its_own_temp_dir_and_ports_and_no_dashboard() -> None:
    ports = [41000 + i for i in range(len(PORT_FLAGS))]
    argv = start_argv(Path("/env/bin/ray"), Path("/tmp/run/ray"), ports, 16, 1)
    assert argv[:4] == ["/env/bin/ray", "start", "--head", "--block"]
    assert argv[argv.index("--temp-dir") + 1] == "/tmp/run/ray"
    assert argv[argv.index("--node-ip-address") + 1] == "127.0.0.1"
    assert argv[argv.index("--num-cpus") + 1] == "16"
    assert argv[argv.index("--num-gpus") + 1] == "1"
    assert "--include-dashboard=false" in argv
    # every port given: an agent port left at 0 makes the raylet wait 15 s for a file, then abort
    for flag, port in zip(PORT_FLAGS, ports, strict=True):
        assert argv[argv.index(flag) + 1] == str(port)
    assert "--dashboard-agent-grpc-port" in PORT_FLAGS


def test_free_ports_are_distinct() -> None:
    ports = free_ports(7)
    assert len(set(ports)) == 7


def test_the_private_rays_processes_get_the_cpu_platform_but_no_address() -> None:
    env = launch.ray_environment(settings())
    assert env["VERL_PLATFORM"] == "cpu"
    assert "RAY_ADDRESS" not in env
    assert QUIET["RAY_enable_worker_prestart"] == "0"


def test_the_runs_programs_never_get_the_users_ray_and_cache_bytecode_outside_the_env() -> None:
    from verl_setup.smoke.run import _child_env  # noqa: PLC0415  # the one helper under test

    env = _child_env(
        {"RAY_ADDRESS": "10.0.0.1:6379", "PYTHONDONTWRITEBYTECODE": "1", "VERL_SETUP_CACHE_DIR": "/c"}
    )
    assert "RAY_ADDRESS" not in env
    assert "PYTHONDONTWRITEBYTECODE" not in env
    assert env["PYTHONPYCACHEPREFIX"] == "/c/pycache"
    assert _child_env({"PYTHONPYCACHEPREFIX": "/mine"})["PYTHONPYCACHEPREFIX"] == "/mine"


def test_smoke_warns_before_launch_when_its_ray_cannot_place_the_transfer_queue() -> None:
    from verl_setup.smoke.run import SmokeOptions, ray_fit_warning  # noqa: PLC0415  # the helper under test

    two = SmokeOptions(work=WORK, ray_cpus=2, storage_units=8)
    warning = ray_fit_warning(two, 3)  # verl 0.9.1's max_colocate_count: 3 CPUs per GPU bundle
    assert warning is not None
    assert "a Ray of 2 CPUs cannot place what this run takes (13:" in warning
    assert warning.endswith("fits: --ray-cpus 13")
    assert ray_fit_warning(SmokeOptions(work=WORK, ray_cpus=8, storage_units=8), 3) is not None
    assert str(ray_fit_warning(SmokeOptions(work=WORK, ray_cpus=8, storage_units=8), 3)).endswith(
        "--storage-units 3"
    )
    assert ray_fit_warning(SmokeOptions(work=WORK), 3) is None  # the defaults: 16 CPUs, 1 unit


def test_smoke_refuses_a_prefix_verl_setup_did_not_make_in_one_line(tmp_path: Path) -> None:
    from tests.conftest import run_cli  # noqa: PLC0415

    result = run_cli("smoke", "--prefix", str(tmp_path), "--work", str(tmp_path / "run"))
    assert result.code == 2
    assert result.err.strip().splitlines() == [
        f"verl-setup: error: {tmp_path} has no verl-setup.json: not an env `verl-setup install` made"
    ]
    assert not (tmp_path / "run").exists()


def test_smoke_refuses_a_verl_without_cpu_modules_before_starting_anything(tmp_path: Path) -> None:
    import json  # noqa: PLC0415

    from tests.conftest import run_cli  # noqa: PLC0415

    manifest = {"row": {"id": "verl0.8-x"}, "distributions": {"verl": "0.8.2", "vllm": "0.10.0"}}
    (tmp_path / "verl-setup.json").write_text(json.dumps(manifest))
    result = run_cli("smoke", "--prefix", str(tmp_path), "--work", str(tmp_path / "run"))
    assert result.code == 2
    assert "verl 0.8.2 has no CPU smoke modules (kept for verl 0.9)" in result.err
    assert "run the GPU path (--gpus N) on a GPU host" in result.err


def test_the_reward_tells_digit_free_answers_apart_so_a_first_step_has_a_gradient() -> None:
    """A random model's first answers often hold no digit: were every reward of a group 0, GRPO's
    advantages and the step's grad_norm would be 0 and the losses check would fail (seen 2026-12-07)."""
    import importlib.util  # noqa: PLC0415

    from verl_setup.scripts import script_path  # noqa: PLC0415

    spec = importlib.util.spec_from_file_location("tiny_reward", script_path("smoke_reward"))
    assert spec is not None
    assert spec.loader is not None
    reward = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(reward)
    score = reward.compute_score
    assert score("smoke", "#### 12", 12) == 1.0
    assert 0.5 < score("smoke", "the sum is 12", 12) < 0.51  # both digits: half, and a little more
    assert score("smoke", "xq<|end|>", 12) != score("smoke", "abab", 12)
    assert 0 < score("smoke", "abab", 12) < 0.01
    assert score("smoke", None, 12) == 0.0
