"""The Megatron rows carry what the import probe's bridge checks need: the bridge the row's verl
builds models with by default, installed as verl installs it, with what that bridge imports."""

from __future__ import annotations

import dataclasses

from verl_setup.matrix.load import load_matrix
from verl_setup.matrix.schema import Row
from verl_setup.util.versions import minor_of

# The bridge each verl line builds Megatron models with by default (the probe reads the same from
# the installed verl): verl/trainer/config/engine/megatron.yaml, use_mbridge: True and
# vanilla_mbridge: True at v0.8.0 (mbridge), False in verl 0.9.1 (Megatron-Bridge).
DEFAULT_BRIDGE = {"0.8": "mbridge", "0.9": "megatron-bridge"}
# What the bridge imports besides itself: Megatron-Bridge 0.5 imports modelopt (verl main's
# pyproject: "megatron-bridge hard-imports modelopt") and transformer_engine.pytorch
# (megatron/bridge/peft/lora_layers.py, unguarded); mbridge imports megatron.core.
NEEDS = {
    "megatron-bridge": ("megatron-core", "nvidia-modelopt", "transformer-engine-torch"),
    "mbridge": ("megatron-core",),
}
# mbridge commits that read transformers 5 configs (mbridge/utils/hf_config.py get_hf_rope_theta;
# PyPI's 0.15.1 reads hf_config.rope_theta, which transformers 5 configs lack: audit 2026-12-b).
MBRIDGE_READS_TRANSFORMERS_5 = ("641a5a0",)


def bridge_problems(row: Row) -> list[str]:
    """Why the probe's bridge checks would fail on an install of this Megatron row."""
    line = minor_of(row.verl.version)
    bridge = DEFAULT_BRIDGE.get(line)
    if bridge is None:
        return [f"verl {line}: no default bridge recorded here"]
    problems = (
        [f"{bridge} (verl {line}'s default bridge) is not in the row"] if bridge not in row.packages else []
    )
    if bridge in row.packages and bridge not in row.no_deps:
        problems.append(f"{bridge} is installed with its dependencies (verl installs it deps-free)")
    problems += [f"{bridge} needs {n}, which the row lacks" for n in NEEDS[bridge] if n not in row.packages]
    if "mbridge" in row.packages and not row.sources.get("mbridge", "").endswith(
        tuple("@" + c for c in MBRIDGE_READS_TRANSFORMERS_5)
    ):
        problems.append("mbridge does not come from a commit that reads transformers 5 configs")
    return problems


def megatron_rows() -> list[Row]:
    return [r for r in load_matrix().rows if r.backend == "megatron"]


def test_every_megatron_row_carries_its_verls_default_bridge_and_what_it_imports() -> None:
    rows = megatron_rows()
    assert {r.id for r in rows} >= {"verl0.9-vllm0.24.0-megatron", "verl0.8-vllm0.20.2-megatron"}
    assert {r.id: bridge_problems(r) for r in rows} == {r.id: [] for r in rows}


def test_a_row_that_misses_a_bridge_or_takes_pypis_mbridge_is_named() -> None:
    rows = {r.id: r for r in megatron_rows()}
    row09, row08 = rows["verl0.9-vllm0.24.0-megatron"], rows["verl0.8-vllm0.20.2-megatron"]
    # As the row was before audit 2026-12-b: mbridge from the index only, no Megatron-Bridge.
    packages = {k: v for k, v in row09.packages.items() if k != "megatron-bridge"}
    before = dataclasses.replace(row09, packages=packages, no_deps=(), sources={})
    assert bridge_problems(before) == [
        "megatron-bridge (verl 0.9's default bridge) is not in the row",
        "mbridge does not come from a commit that reads transformers 5 configs",
    ]
    no_modelopt = {k: v for k, v in row09.packages.items() if k != "nvidia-modelopt"}
    assert bridge_problems(dataclasses.replace(row09, packages=no_modelopt)) == [
        "megatron-bridge needs nvidia-modelopt, which the row lacks"
    ]
    with_deps = dataclasses.replace(row08, no_deps=())
    assert bridge_problems(with_deps) == [
        "mbridge is installed with its dependencies (verl installs it deps-free)"
    ]
