"""The launch lint reads what the launch points at, and the memory check sizes the model: on a real
parquet without the prompt column (written by pyarrow), a tiny model config with random weights
saved locally (safetensors), verl 0.9.1's own code, and a real tmpfs standing in for /dev/shm.
Nothing is downloaded.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import json_data, run_cli
from tests.integration.cluster_env import torch_venv
from tests.integration.test_doctor_ray_local import tmpfs  # noqa: F401  # fixture: a real 8 MiB tmpfs
from verl_setup.doctor.checks import memory

pytestmark = [pytest.mark.slow, pytest.mark.network]
MAIN_PPO = ("python3", "-m", "verl.trainer.main_ppo")
MAKE = """
import json, sys, pathlib
import pyarrow as pa, pyarrow.parquet as pq, torch
from safetensors.torch import save_file
out = pathlib.Path(sys.argv[1])
pq.write_table(pa.table({"question": ["1+1?"], "answer": ["2"]}), out / "no_prompt.parquet")
pq.write_table(pa.table({"prompt": [[{"role": "user", "content": "1+1?"}]]}), out / "good.parquet")
model = out / "tiny-model"
model.mkdir()
config = {"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 48,
          "num_attention_heads": 6, "num_key_value_heads": 2, "num_hidden_layers": 1,
          "intermediate_size": 96, "vocab_size": 128}
(model / "config.json").write_text(json.dumps(config))
torch.manual_seed(0)
weights = {"model.embed_tokens.weight": torch.randn(128, 48, dtype=torch.bfloat16)}
save_file(weights, str(model / "model.safetensors"))
"""


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(venv, folder with the parquet files and the tiny model)."""
    venv = torch_venv()
    folder = tmp_path_factory.mktemp("launch-data")
    subprocess.run([str(venv / "bin/python"), "-c", MAKE, str(folder)], check=True, timeout=120)
    return venv, folder


def doctor(venv: Path, *argv: str, check: str = "launch") -> tuple[int, dict[str, Any]]:
    result = run_cli("doctor", "--json", "--check", check, "--prefix", str(venv), *argv)
    assert result.err == "", result.err
    (found,) = json_data(result.out)["checks"]
    print(json.dumps(found, indent=1))  # quoted per census row in the report
    return result.code, found


def failed(check: dict[str, Any]) -> list[str]:
    return [f["message"] for f in check["findings"] if f["status"] == "fail"]


def test_a_parquet_without_the_prompt_column_fails_naming_its_columns(made: tuple[Path, Path]) -> None:
    venv, folder = made
    bad, good = folder / "no_prompt.parquet", folder / "good.parquet"
    code, check = doctor(venv, "--", *MAIN_PPO, f"data.train_files={bad}", f"data.val_files={good}")
    assert f"{bad} has no 'prompt' column (data.prompt_key)" in "\n".join(failed(check))
    assert any(m.endswith("it has question, answer") for m in failed(check))
    assert not any(str(good) in m for m in failed(check))
    columns = {e["name"]: e["value"] for e in check["evidence"]}
    assert columns["columns of good.parquet"] == "prompt"
    assert code == 5
    # data.prompt_key names the column that does hold the prompts: no data finding left
    _, check = doctor(venv, "--", *MAIN_PPO, f"data.train_files=[{bad}]", "data.prompt_key=question")
    assert not any("column" in m for m in failed(check))


def test_missing_data_file_and_a_model_path_without_config(made: tuple[Path, Path], tmp_path: Path) -> None:
    venv, folder = made
    code, check = doctor(
        venv, "--", *MAIN_PPO, f"data.train_files={folder}/nope.parquet",
        f"actor_rollout_ref.model.path={tmp_path}",
    )  # fmt: skip
    messages = failed(check)
    assert f"data.train_files: {folder}/nope.parquet does not exist here" in messages
    assert (
        f"actor_rollout_ref.model.path={tmp_path} is no model folder here (no readable config.json)"
        in messages
    )
    assert code == 5


def test_a_hub_id_that_is_not_cached_while_offline(
    made: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    venv, _ = made
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path))  # an empty cache
    _, check = doctor(venv, "--", *MAIN_PPO, "actor_rollout_ref.model.path=Qwen/Qwen2.5-0.5B-Instruct")
    assert any(m.startswith("Qwen/Qwen2.5-0.5B-Instruct is not in the HF cache") for m in failed(check))


def test_tensor_parallel_must_divide_the_models_heads(made: tuple[Path, Path]) -> None:
    venv, folder = made
    model = folder / "tiny-model"
    _, check = doctor(
        venv, "--", *MAIN_PPO, f"actor_rollout_ref.model.path={model}",
        "actor_rollout_ref.rollout.tensor_model_parallel_size=4", "trainer.n_gpus_per_node=8",
    )  # fmt: skip
    assert any(
        m.startswith("tensor_model_parallel_size=4 does not divide the model's 6") for m in failed(check)
    )
    _, check = doctor(
        venv, "--", *MAIN_PPO, f"actor_rollout_ref.model.path={model}",
        "actor_rollout_ref.rollout.tensor_model_parallel_size=2", "trainer.n_gpus_per_node=8",
    )  # fmt: skip
    assert not any("attention heads" in m for m in failed(check))


def test_rollout_mode_sync_was_removed_from_verl_091(made: tuple[Path, Path]) -> None:
    venv, _ = made
    _, check = doctor(venv, "--", *MAIN_PPO, "actor_rollout_ref.rollout.mode=sync")
    assert "rollout.mode=sync is removed in verl 0.9.1 (it accepts async)" in failed(check)


def test_dynamic_batch_token_budget_must_hold_one_sequence(made: tuple[Path, Path]) -> None:
    venv, _ = made
    _, check = doctor(
        venv, "--", *MAIN_PPO, "actor_rollout_ref.actor.use_dynamic_bsz=True",
        "actor_rollout_ref.actor.ppo_max_token_len_per_gpu=1024",
        "data.max_prompt_length=1024", "data.max_response_length=2048",
    )  # fmt: skip
    assert any("ppo_max_token_len_per_gpu=1024 < max_prompt_length + max_response_length = 3072" in m
               for m in failed(check))  # fmt: skip


def test_memory_reads_the_local_models_weights_and_fails_a_given_size_times_workers(
    made: tuple[Path, Path],
) -> None:
    venv, folder = made
    model = folder / "tiny-model"
    code, check = doctor(
        venv, "--", *MAIN_PPO, f"actor_rollout_ref.model.path={model}", "trainer.n_gpus_per_node=8",
        check="memory",
    )  # fmt: skip
    evidence = {e["name"]: e for e in check["evidence"]}
    assert evidence["model"]["source"] == f"{model}: sum of 1 *.safetensors file(s)"
    assert check["status"] in ("pass", "warn")  # 12 KiB of weights
    ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    size = int(ram) + 1  # one worker's copy already exceeds the RAM
    code, check = doctor(
        venv, "--model-size", f"{size}GiB", "--", *MAIN_PPO, "trainer.n_gpus_per_node=8", check="memory"
    )
    assert check["status"] == "fail"
    assert check["summary"].startswith(f"8 colocated workers loading a {size}.0 GiB model need about")
    assert code == 5


def test_a_small_dev_shm_on_a_real_tmpfs(
    made: tuple[Path, Path],
    tmpfs: Path,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    venv, _ = made
    monkeypatch.setattr(memory, "SHM", tmpfs)  # a container's 8 MiB /dev/shm, mounted for real
    _, check = doctor(venv, check="memory")
    shm = next(f for f in check["findings"] if f["message"].startswith(f"{tmpfs} has 8 MiB free"))
    assert shm["status"] == "warn"
    assert "--shm-size" in shm["remedy"]
