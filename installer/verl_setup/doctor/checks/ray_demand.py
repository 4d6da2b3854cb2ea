"""The Ray-CPU trap: the CPUs verl's own actors take on a Ray against the CPUs that Ray has.

Held for the whole run, 1 CPU each: TransferQueue's SimpleStorage units and its controller
(transfer_queue storage/simple_storage.py:722 and controller.py:943 are `@ray.remote(num_cpus=1)`;
verl 0.9's V1 TaskRunner turns the queue on whatever transfer_queue.enable says, main_ppo.py:143),
and the GPU workers' placement-group bundles (max_colocate_count CPUs per GPU). Placed with 1 CPU and
held with 0 (Ray's default for an actor): the TaskRunner, the agent loop workers and the reward loop
workers, each needing a free CPU when it is placed. With too few, main_ppo waits forever with no
error: verl 0.9.1 on a 2-CPU Ray stops in tq.init (the CPU training study, attempt A1).
"""

from __future__ import annotations

from dataclasses import dataclass

from verl_setup.doctor.context import Context
from verl_setup.doctor.result import Evidence, Finding

UNITS = "transfer_queue.backend.SimpleStorage.num_data_storage_units"
AGENT = "actor_rollout_ref.rollout.agent.num_workers"
REWARD = "reward.num_workers"
V1 = "trainer.use_v1"


@dataclass(frozen=True, kw_only=True)
class Demand:
    """The CPUs a launch takes on Ray, by who takes them."""

    storage_units: int  # TransferQueue storage actors (0: no TransferQueue in this verl/launch)
    controller: int
    bundles: int  # GPUs x CPUs per bundle
    agent_workers: int
    reward_workers: int

    @property
    def held(self) -> int:
        """CPUs held for the whole run."""
        return self.storage_units + self.controller + self.bundles

    @property
    def needed(self) -> int:
        """Held CPUs plus one free for placing the 0-CPU actors (TaskRunner, agent and reward loops)."""
        return self.held + 1

    def words(self) -> str:
        tq = (
            f"TransferQueue {self.storage_units} storage units + 1 controller, " if self.storage_units else ""
        )
        return (
            f"{tq}GPU worker bundles {self.bundles}, 1 free to place the TaskRunner, "
            f"{self.agent_workers} agent loop and {self.reward_workers} reward loop workers"
        )


def demand(ctx: Context, gpus: int, per_bundle: int) -> tuple[Demand, str] | None:
    """What the launch (or verl's defaults) asks Ray for; None without a launch or a verl config."""
    config, _ = ctx.verl_config
    if ctx.launch is None or config is None:
        return None
    has_tq = config.has(UNITS) and _flag(ctx, V1, default=True)
    units = (ctx.launch_int(UNITS, 8) or 0) if has_tq else 0
    found = Demand(
        storage_units=units,
        controller=1 if has_tq else 0,
        bundles=gpus * per_bundle,
        agent_workers=(ctx.launch_int(AGENT, 8) or 0) if config.has(AGENT) else 0,
        reward_workers=(ctx.launch_int(REWARD, 8) or 0) if config.has(REWARD) else 0,
    )
    source = "the launch's overrides over the installed verl's config" + (
        "; transfer_queue: @ray.remote(num_cpus=1) storage units and controller" if has_tq else ""
    )
    return found, source


def fitting_overrides(d: Demand, cpus: int, key: str) -> list[str]:
    """Overrides with which the launch fits `cpus` (first: the fewest changes)."""
    fixes = [f"{key}={d.needed}"]  # logical CPUs: these actors mostly wait, a count above the cores is safe
    if d.storage_units > 1:
        units = cpus - d.controller - d.bundles - 1
        if units >= 1:
            fixes.insert(0, f"{UNITS}={min(units, d.storage_units)}")
    if d.agent_workers > 1 or d.reward_workers > 1:
        fixes.append(f"{AGENT}=1 {REWARD}=1 (fewer idle workers: less memory and start-up on a small host)")
    return fixes


def findings(
    ctx: Context, counted: int, *, key: str, gpus: int, per_bundle: int, evidence: list[Evidence]
) -> list[Finding]:
    """A fail when the actors verl starts cannot all be placed on a Ray of `counted` CPUs."""
    found = demand(ctx, gpus, per_bundle)
    if found is None:
        return []
    d, source = found
    evidence.append(Evidence(name="Ray CPUs verl takes", value=f"{d.needed}: {d.words()}", source=source))
    if counted >= d.needed:
        return []
    return [
        Finding(
            status="fail",
            message=f"Ray has {counted} CPUs and this launch takes {d.needed} ({d.words()}): the actors "
            "that do not fit wait for a CPU forever, and main_ppo hangs with no error"
            + (" in tq.init" if d.storage_units + d.controller > counted else ""),
            remedy="add to the launch: " + "; or ".join(fitting_overrides(d, counted, key)),
        )
    ]


def _flag(ctx: Context, key: str, *, default: bool) -> bool:
    given = ctx.launch.override(key) if ctx.launch else None
    if given is None or given.value is None:
        config, _ = ctx.verl_config
        value = config.get(key) if config is not None and config.has(key) else default
        return bool(value)
    return given.value.strip().lower() in ("true", "1", "yes")
