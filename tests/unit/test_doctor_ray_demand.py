"""doctor's Ray-CPU trap: the CPUs verl 0.9's actors take on a private Ray against what Ray has."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.conftest import host
from verl_setup.doctor.checks.ray_demand import Demand, findings, fitting_overrides
from verl_setup.doctor.context import Context, Options
from verl_setup.doctor.probes.verl_config import VerlConfig
from verl_setup.doctor.result import Evidence
from verl_setup.matrix.load import load_matrix

# The values verl 0.9.1 ships (verl/trainer/config/_generated_ppo_trainer.yaml: 939, 361, 779, 1062).
VERL_091: dict[str, Any] = {
    "transfer_queue": {"enable": False, "backend": {"SimpleStorage": {"num_data_storage_units": 8}}},
    "actor_rollout_ref": {"rollout": {"agent": {"num_workers": 8}}},
    "reward": {"num_workers": 8},
    "trainer": {"use_v1": True, "n_gpus_per_node": 8, "nnodes": 1},
    "ray_kwargs": {"ray_init": {"num_cpus": None}},
}
KEY = "ray_kwargs.ray_init.num_cpus"


def ctx(*overrides: str, data: dict[str, Any] | None = None) -> Context:
    c = Context(
        options=Options(launch=("python3", "-m", "verl.trainer.main_ppo", *overrides)),
        host=host(),
        env={"PATH": ""},
        matrix=load_matrix(),
    )
    config = VerlConfig(
        version="0.9.1",
        config_dir=Path("/verl/trainer/config"),
        config_name="ppo_trainer",
        source=Path("/verl/trainer/config/ppo_trainer.yaml"),
        data=data if data is not None else VERL_091,
        groups=frozenset(),
    )
    c.__dict__["verl_config"] = (config, "")  # the installed verl's config, as doctor composes it
    return c


def test_a_two_cpu_ray_with_verl_defaults_is_named_with_the_overrides_that_fit() -> None:
    evidence: list[Evidence] = []
    found = findings(ctx("trainer.n_gpus_per_node=1"), 2, key=KEY, gpus=1, per_bundle=1, evidence=evidence)
    assert len(found) == 1
    f = found[0]
    assert f.status == "fail"
    assert "Ray has 2 CPUs and this launch takes 11" in f.message
    assert "TransferQueue 8 storage units + 1 controller" in f.message
    assert "8 agent loop and 8 reward loop workers" in f.message
    assert "hangs with no error in tq.init" in f.message
    assert f.remedy is not None
    assert f"{KEY}=11" in f.remedy
    assert "actor_rollout_ref.rollout.agent.num_workers=1 reward.num_workers=1" in f.remedy
    # with 2 CPUs not even 1 storage unit fits beside the controller, the bundle and a free CPU
    assert "num_data_storage_units" not in f.remedy
    assert any(e.name == "Ray CPUs verl takes" and e.value.startswith("11:") for e in evidence)


def test_fewer_storage_units_are_offered_when_they_fit() -> None:
    found = findings(ctx("trainer.n_gpus_per_node=1"), 6, key=KEY, gpus=1, per_bundle=1, evidence=[])
    assert found
    assert found[0].remedy is not None
    assert found[0].remedy.startswith(
        "add to the launch: transfer_queue.backend.SimpleStorage.num_data_storage_units=3"
    )


def test_the_smoke_runs_settings_fit_a_16_cpu_ray() -> None:
    c = ctx(
        "trainer.n_gpus_per_node=1",
        "transfer_queue.backend.SimpleStorage.num_data_storage_units=1",
        "actor_rollout_ref.rollout.agent.num_workers=1",
        "reward.num_workers=1",
        f"{KEY}=16",
    )
    assert findings(c, 16, key=KEY, gpus=1, per_bundle=1, evidence=[]) == []


def test_a_verl_without_transfer_queue_counts_only_bundles() -> None:
    old = {"trainer": {"n_gpus_per_node": 8}, "ray_init": {"num_cpus": None}}
    evidence: list[Evidence] = []
    assert findings(ctx(data=old), 16, key="ray_init.num_cpus", gpus=8, per_bundle=1, evidence=evidence) == []
    assert "TransferQueue" not in evidence[0].value


def test_fitting_overrides_never_offer_zero_storage_units() -> None:
    d = Demand(storage_units=8, controller=1, bundles=8, agent_workers=1, reward_workers=1)
    assert fitting_overrides(d, 4, KEY) == [f"{KEY}=18"]
