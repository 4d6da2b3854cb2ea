"""doctor's launch lint against really installed verl releases (pure-Python wheels, installed with
uv --no-deps into cached venvs): 0.9.1 (the cpu row) and 0.4.1 (the pre-0.5 rollout.n behaviour).

The venvs live in ~/.cache/verl-setup-tests (first run: a few seconds of download each; later
runs reuse them). verl is never imported: the doctor reads the YAML files it ships.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import json_data, run_cli
from verl_setup.util.uvbin import find_uv

pytestmark = pytest.mark.network

CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "verl-setup-tests"
PYENV = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv") / "versions"
MAIN_PPO = ("python3", "-m", "verl.trainer.main_ppo")
# A launch that fits verl 0.9.1's config on one node with 4 GPUs.
GOOD = (
    "data.train_batch_size=64",
    "actor_rollout_ref.rollout.name=sglang",
    "actor_rollout_ref.rollout.n=4",
    "actor_rollout_ref.rollout.tensor_model_parallel_size=2",
    "actor_rollout_ref.rollout.gpu_memory_utilization=0.4",
    "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=8",
    "actor_rollout_ref.actor.ppo_mini_batch_size=16",
    "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4",
    "trainer.n_gpus_per_node=4",
    "trainer.nnodes=1",
)


def _interpreter(minor: str) -> str:
    found = sorted(PYENV.glob(f"{minor}.*/bin/python3"))
    return str(found[-1]) if found else sys.executable


def verl_venv(minor: str, *pins: str) -> Path:
    """A venv with exactly these distributions (no dependencies), built once and cached."""
    CACHE.mkdir(parents=True, exist_ok=True)
    venv = CACHE / ("-".join(p.replace("==", "-") for p in pins) + f"-py{minor}")
    with (CACHE / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # xdist workers share the cache
        site = next(iter(venv.glob("lib/python*/site-packages")), None)
        # dist-info folders carry the normalized name (antlr4_python3_runtime-4.9.3.dist-info).
        have = {d.name.lower().replace("_", "-") for d in site.glob("*.dist-info")} if site else set()
        if site and all(p.lower().replace("==", "-").replace("_", "-") + ".dist-info" in have for p in pins):
            return venv
        env = {**os.environ, "UV_PYTHON_DOWNLOADS": "never"}
        uv = find_uv()
        made = subprocess.run(
            [uv, "venv", "-q", "--python", _interpreter(minor), str(venv)],
            env=env,
            capture_output=True,
            timeout=120,
            check=False,
        )
        installed = made.returncode == 0 and (
            subprocess.run(
                [uv, "pip", "install", "-q", "--python", str(venv / "bin/python"), "--no-deps", *pins],
                env=env,
                capture_output=True,
                timeout=300,
                check=False,
            ).returncode
            == 0
        )
        if not installed:
            pytest.skip(f"cannot install {' '.join(pins)} from the package index here")
    return venv


@pytest.fixture(scope="session")
def verl091() -> Path:
    """The cpu row: verl 0.9.1 without an engine."""
    return verl_venv("3.12", "verl==0.9.1")


@pytest.fixture(scope="session")
def verl091_sglang() -> Path:
    """verl 0.9.1 beside the pure-Python sglang wheel of row verl0.9-sglang0.5.12."""
    return verl_venv("3.12", "verl==0.9.1", "sglang==0.5.12")


@pytest.fixture(scope="session")
def verl041() -> Path:
    return verl_venv("3.10", "verl==0.4.1")


@pytest.fixture(autouse=True)
def _no_ray(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [n for n in os.environ if n.startswith("RAY_")]:
        monkeypatch.delenv(name)


def lint(venv: Path, *overrides: str, main: tuple[str, ...] = MAIN_PPO) -> tuple[int, dict[str, Any]]:
    result = run_cli("doctor", "--json", "--check", "launch", "--prefix", str(venv), "--", *main, *overrides)
    assert result.err == "", result.err
    (check,) = json_data(result.out)["checks"]
    return result.code, check


def messages(check: dict[str, Any], status: str) -> list[str]:
    return [f["message"] for f in check["findings"] if f["status"] == status]


def test_a_launch_that_fits_verl_091_passes_and_names_the_config_it_read(verl091_sglang: Path) -> None:
    code, check = lint(verl091_sglang, *GOOD)
    assert check["status"] == "pass", check
    assert code == 0
    config = next(e["value"] for e in check["evidence"] if e["name"] == "config")
    assert config.endswith("verl/trainer/config/_generated_ppo_trainer.yaml")
    assert Path(config).is_file()


def test_unknown_key_needs_a_plus_and_the_seeds_ray_address_is_not_a_verl_setting(
    verl091_sglang: Path,
) -> None:
    code, check = lint(
        verl091_sglang, *GOOD, "trainer.ray_address=http://127.0.0.1:8265", "trainer.n_gpu_per_node=4"
    )
    failed = messages(check, "fail")
    assert any(m.startswith("trainer.ray_address is not in verl 0.9.1's config") for m in failed)
    assert any(m.startswith("trainer.n_gpu_per_node is not in") for m in failed)
    assert "RAY_ADDRESS" in check["remedy"]
    assert "did you mean trainer.n_gpus_per_node?" in check["remedy"]
    assert code == 5


def test_plus_on_an_existing_key_fails_and_plus_on_a_new_engine_kwarg_passes(verl091_sglang: Path) -> None:
    _, check = lint(
        verl091_sglang, *GOOD, "+actor_rollout_ref.rollout.n=2",
        "+actor_rollout_ref.rollout.engine_kwargs.vllm.disable_cascade_attn=True",
    )  # fmt: skip
    failed = messages(check, "fail")
    assert len(failed) == 1
    assert failed[0].startswith("+actor_rollout_ref.rollout.n: the key already exists")


def test_engine_that_is_not_installed_in_the_cpu_row(verl091: Path) -> None:
    _, check = lint(verl091, *GOOD)
    assert messages(check, "fail") == ["rollout.name=sglang but sglang is not installed in this env"]


def test_engine_name_verl_does_not_know(verl091_sglang: Path) -> None:
    _, check = lint(verl091_sglang, *GOOD, "actor_rollout_ref.rollout.name=hf")
    assert messages(check, "fail") == [
        "rollout.name=hf is not an engine verl 0.9.1 knows (sglang, trtllm, vllm)"
    ]


def test_rollout_name_is_mandatory_in_091(verl091_sglang: Path) -> None:
    overrides = [o for o in GOOD if not o.startswith("actor_rollout_ref.rollout.name=")]
    _, check = lint(verl091_sglang, *overrides)
    assert any("rollout.name is mandatory in verl 0.9.1" in m for m in messages(check, "fail"))


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        (
            ("actor_rollout_ref.rollout.tensor_model_parallel_size=3",),
            "tensor_model_parallel_size=3 does not divide",
        ),
        (
            ("actor_rollout_ref.rollout.gpu_memory_utilization=1.5",),
            "gpu_memory_utilization=1.5 is outside (0, 1]",
        ),
        (
            ("actor_rollout_ref.rollout.gpu_memory_utilization=0",),
            "gpu_memory_utilization=0 is outside (0, 1]",
        ),
        (
            ("data.train_batch_size=18", "actor_rollout_ref.rollout.n=3"),
            "= 54 is not divisible by nnodes x n_gpus_per_node = 4",
        ),
        (("data.train_batch_size=8",), "data.train_batch_size=8 < actor.ppo_mini_batch_size=16"),
        (
            ("actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=3",),
            "is not divisible by ppo_micro_batch_size_per_gpu=3",
        ),
        (
            ("actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=null",),
            "neither actor.ppo_micro_batch_size_per_gpu",
        ),
    ],
    ids=["tp", "gmu-high", "gmu-zero", "real-batch", "mini-gt-train", "micro", "no-micro"],
)
def test_verls_own_batch_and_parallel_rules(
    verl091_sglang: Path, overrides: tuple[str, ...], expected: str
) -> None:
    code, check = lint(verl091_sglang, *GOOD, *overrides)
    failed = messages(check, "fail")
    assert len(failed) == 1, failed
    assert expected in failed[0]
    assert code == 5


def test_dynamic_batch_size_turns_the_batch_rules_off_as_in_verl(verl091_sglang: Path) -> None:
    _, check = lint(
        verl091_sglang, *GOOD, "data.train_batch_size=3", "actor_rollout_ref.actor.use_dynamic_bsz=True"
    )
    assert check["status"] == "pass", check


def test_rollout_n_in_091_repeats_prompts_before_generation(verl091_sglang: Path) -> None:
    _, check = lint(verl091_sglang, *GOOD)
    note = next(m for m in messages(check, "pass") if m.startswith("rollout.n=4"))
    assert "repeats each prompt n times in the trainer before generation" in note
    assert "n=1" in note
    assert "64 prompts x 4 = 256 trajectories per step" in note
    where = next(e["value"] for e in check["evidence"] if e["name"] == "rollout.n mechanism")
    path, line, code = where.split(":", 2)
    assert path.endswith("verl/trainer/ppo/ray_trainer.py")
    assert "gen_batch.repeat(" in Path(path).read_text().splitlines()[int(line) - 1]
    assert "gen_batch.repeat(" in code


def test_rollout_n_in_041_is_batched_by_vllm_sampling_params(verl041: Path) -> None:
    _, check = lint(verl041, "actor_rollout_ref.rollout.n=5", "actor_rollout_ref.rollout.name=hf")
    # "hf" was still an engine in 0.4 (only not installed in this env).
    assert "rollout.name=hf but transformers is not installed in this env" in messages(check, "fail")
    note = next(m for m in messages(check, "pass") if m.startswith("rollout.n=5"))
    assert "copies n into vLLM's SamplingParams" in note
    where = next(e["value"] for e in check["evidence"] if e["name"] == "rollout.n mechanism")
    assert "vllm_rollout_spmd.py" in where
    assert "SamplingParams()" in where
    # 0.4.1 has no ???-mandatory rollout.name and its flat ppo_trainer.yaml is the config.
    config = next(e["value"] for e in check["evidence"] if e["name"] == "config")
    assert config.endswith("verl/trainer/config/ppo_trainer.yaml")


def test_n_with_prefix_caching_off_warns_in_091(verl091_sglang: Path) -> None:
    _, check = lint(verl091_sglang, *GOOD, "actor_rollout_ref.rollout.enable_prefix_caching=False")
    assert check["status"] == "warn"
    assert "recomputes the prompt's prefill" in check["summary"]


def test_group_overrides_and_hydra_keys_are_not_flagged(verl091_sglang: Path) -> None:
    _, check = lint(verl091_sglang, *GOOD, "model_engine=megatron", "hydra.run.dir=/tmp/x")
    assert not messages(check, "fail")


def test_no_verl_in_the_env_is_a_skip_with_the_reason() -> None:
    result = run_cli("doctor", "--json", "--check", "launch", "--prefix", sys.prefix, "--", *MAIN_PPO, "a=1")
    (check,) = json_data(result.out)["checks"]
    assert check["status"] == "skip"
    assert "verl is not installed in" in check["summary"]


@pytest.fixture(scope="session")
def verl091_hydra() -> Path:
    """verl 0.9.1 with the Hydra its wheel declares (hydra-core and what it needs, no torch)."""
    return verl_venv(
        "3.12", "verl==0.9.1", "hydra-core==1.3.2", "omegaconf==2.3.0", "antlr4-python3-runtime==4.9.3",
        "PyYAML==6.0.2", "packaging==24.2",
    )  # fmt: skip


def test_the_targets_own_hydra_rejects_an_override_the_grammar_does_not_take(verl091_hydra: Path) -> None:
    # Census finding: the regex re-implementation accepted `data.train_batch_size=[1,2`.
    code, check = lint(verl091_hydra, *GOOD, "data.train_batch_size=[1,2")
    assert code == 5
    hydra = [f for f in check["findings"] if f["message"].startswith("Hydra 1.3.2 rejects")]
    assert len(hydra) == 1
    assert "OverrideParseException" in hydra[0]["message"]
    assert "[1,2" in hydra[0]["message"]


def test_a_good_launch_composes_and_a_missing_key_is_left_to_verls_rule(verl091_hydra: Path) -> None:
    _, check = lint(verl091_hydra, *GOOD)  # (this env has no sglang: that finding is not Hydra's)
    assert any(e["name"] == "hydra" and "composed" in e["value"] for e in check["evidence"])
    assert not any(f["message"].startswith("Hydra") for f in check["findings"])
    _, check = lint(verl091_hydra, *GOOD, "actor_rollout_ref.actor.fsdp_config.grad_offload=True")
    messages = [f["message"] for f in check["findings"]]
    assert any("grad_offload is not in verl 0.9.1's config" in m for m in messages)
    assert not any(m.startswith("Hydra") for m in messages)
