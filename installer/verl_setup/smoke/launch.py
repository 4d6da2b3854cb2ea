"""The main_ppo command line of a smoke run: its Hydra overrides and environment, CPU or GPU.

Pure: nothing here runs anything, so the launch a GPU host would make is tested on this one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from verl_setup.scripts import SMOKE, script_path
from verl_setup.util.versions import minor_of

SCRIPTS = SMOKE
# verl minor -> the folder of its CPU platform and HF rollout modules (they use verl's private hooks).
MODULE_LINES = {"0.9": "v0_9"}
MODULES = ("verl_smoke_cpu_platform", "verl_smoke_hf_rollout")
STEPS = 2
PROMPTS_PER_STEP = 4
SAMPLES = 4
RESPONSE_TOKENS = 16
PROMPT_TOKENS = 64


class NoModuleLineError(ValueError):
    """The installed verl's minor has no CPU modules here."""


@dataclass(frozen=True, kw_only=True)
class SmokeLaunch:
    """What a smoke run starts: main_ppo's argv (after the interpreter), environment and overrides."""

    python: Path
    overrides: tuple[str, ...]
    env: dict[str, str] = field(default_factory=dict)

    @property
    def argv(self) -> list[str]:
        return [str(self.python), "-m", "verl.trainer.main_ppo", *self.overrides]


@dataclass(frozen=True, kw_only=True)
class Settings:
    """One smoke run's choices: where, on what, with how many GPUs and Ray CPUs."""

    python: Path
    verl: str  # the installed verl version
    work: Path  # the run's folder: data/, checkpoints/
    model: Path
    gpus: int = 0  # 0: the CPU path (logical GPU, gloo, the hf rollout)
    engine: str | None = None  # the row's rollout engine, for the GPU path
    flash_attn: bool = False  # the env has flash-attn (GPU path: verl's attention defaults)
    storage_units: int = 1  # TransferQueue SimpleStorage units (verl's default is 8)
    agent_workers: int = 1  # agent loop workers (verl's default is 8)
    reward_workers: int = 1  # reward loop workers (verl's default is 8)
    steps: int = STEPS
    lr: float = 1e-3


def module_line(verl: str) -> Path:
    """The folder of the CPU modules for this verl version; NoModuleLineError when there is none."""
    line = MODULE_LINES.get(minor_of(verl))
    if line is None:
        known = ", ".join(sorted(MODULE_LINES))
        raise NoModuleLineError(f"verl {verl} has no CPU smoke modules (kept for verl {known})")
    return SCRIPTS / line


def overrides(s: Settings) -> list[str]:
    """main_ppo's Hydra overrides: sizes for a tiny run, then the CPU or the GPU path's own."""
    reward = script_path("smoke_reward")
    common = [
        "algorithm.adv_estimator=grpo",
        "algorithm.use_kl_in_reward=false",
        f"data.train_files={s.work / 'data' / 'train.parquet'}",
        f"data.val_files={s.work / 'data' / 'val.parquet'}",
        f"data.train_batch_size={PROMPTS_PER_STEP}",
        f"data.max_prompt_length={PROMPT_TOKENS}",
        f"data.max_response_length={RESPONSE_TOKENS}",
        "data.dataloader_num_workers=0",
        f"actor_rollout_ref.model.path={s.model}",
        f"actor_rollout_ref.actor.optim.lr={s.lr:g}",
        f"actor_rollout_ref.actor.ppo_mini_batch_size={PROMPTS_PER_STEP}",
        f"actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu={PROMPTS_PER_STEP * SAMPLES}",
        "actor_rollout_ref.actor.use_kl_loss=false",
        "actor_rollout_ref.actor.entropy_coeff=0",
        "actor_rollout_ref.actor.strategy=fsdp2",
        "actor_rollout_ref.actor.fsdp_config.strategy=fsdp2",
        "actor_rollout_ref.actor.checkpoint.save_contents=[model,optimizer,extra,hf_model]",
        f"actor_rollout_ref.rollout.n={SAMPLES}",
        "actor_rollout_ref.rollout.tensor_model_parallel_size=1",
        f"actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu={PROMPTS_PER_STEP * SAMPLES}",
        "actor_rollout_ref.rollout.calculate_log_probs=true",
        f"actor_rollout_ref.rollout.agent.num_workers={s.agent_workers}",
        f"reward.num_workers={s.reward_workers}",
        f"reward.custom_reward_function.path={reward}",
        "reward.custom_reward_function.name=compute_score",
        f"transfer_queue.backend.SimpleStorage.num_data_storage_units={s.storage_units}",
        f"trainer.total_training_steps={s.steps}",
        f"trainer.save_freq={s.steps}",
        "trainer.test_freq=-1",
        "trainer.val_before_train=false",
        "trainer.resume_mode=disable",
        "trainer.logger=[console]",
        "trainer.project_name=verl_setup_smoke",
        "trainer.experiment_name=smoke",
        f"trainer.default_local_dir={s.work / 'checkpoints'}",
        "trainer.nnodes=1",
        f"trainer.n_gpus_per_node={max(1, s.gpus)}",
    ]
    if s.gpus == 0:
        return [
            *common,
            "trainer.device=cpu",
            "actor_rollout_ref.rollout.name=hf",
            "actor_rollout_ref.actor.fsdp_config.use_torch_compile=false",
            # verl defaults to flash-attn (verl/workers/config/model.py:185), and remove-padding needs it
            "+actor_rollout_ref.model.override_config.attn_implementation=sdpa",
            "actor_rollout_ref.model.use_remove_padding=false",
            "actor_rollout_ref.model.enable_gradient_checkpointing=false",
        ]
    gpu = [
        *common,
        "trainer.device=cuda",
        f"actor_rollout_ref.rollout.name={s.engine}",
        "actor_rollout_ref.rollout.gpu_memory_utilization=0.3",
        "actor_rollout_ref.rollout.enforce_eager=true",
    ]
    if not s.flash_attn:  # a row installed --without flash-attn: the attention it has
        gpu += [
            "+actor_rollout_ref.model.override_config.attn_implementation=sdpa",
            "actor_rollout_ref.model.use_remove_padding=false",
        ]
    return gpu


def environment(s: Settings, ray_address: str) -> dict[str, str]:
    """Variables main_ppo gets on top of the caller's (its Ray's workers get the Ray's own)."""
    env = {
        "RAY_ADDRESS": ray_address,  # the run's private Ray (smoke/ray.py), never the user's
        "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",  # a private Ray stays on loopback
        "HF_HUB_OFFLINE": "1",
        "WANDB_MODE": "disabled",
        "TOKENIZERS_PARALLELISM": "false",
        "PYTHONUNBUFFERED": "1",
    }
    if s.gpus == 0:
        env |= {
            "PYTHONPATH": f"{module_line(s.verl)}:{SCRIPTS}",
            "VERL_USE_EXTERNAL_MODULES": ",".join(MODULES),
            "VERL_PLATFORM": "cpu",
            # verl registers its FSDP engine for cuda and npu only (transformer_impl.py:1143)
            "VERL_ENGINE_DEVICE": "cuda",
        }
    return env


def build(s: Settings, ray_address: str) -> SmokeLaunch:
    """The launch for these settings against the private Ray at `ray_address`."""
    return SmokeLaunch(python=s.python, overrides=tuple(overrides(s)), env=environment(s, ray_address))


def ray_environment(s: Settings) -> dict[str, str]:
    """What the private Ray's processes (and so every verl worker) need: on the CPU path the
    modules' folder and the variables that choose the cpu platform."""
    env = environment(s, "")
    del env["RAY_ADDRESS"]
    return env
