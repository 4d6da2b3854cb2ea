"""The import probe in a real child interpreter, over a stand-in verl tree on PYTHONPATH: which
modules it derives from the installed verl, how it names a missing package, a module that needs a
GPU, and a hang."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from verl_setup.environment.import_probe import run_probe
from verl_setup.environment.uv import explain_failure


def tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


VERL_09 = {
    "verl/__init__.py": "",
    "verl/trainer/__init__.py": "",
    "verl/trainer/main_ppo.py": "",
    "verl/workers/__init__.py": "",
    "verl/workers/engine_workers.py": "import fastapi_missing_here\n",  # as verl 0.9.1 without verl-core
    "verl/workers/rollout/__init__.py": "",
    "verl/workers/rollout/vllm_rollout/__init__.py": "",
    "verl/workers/rollout/vllm_rollout/vllm_async_server.py": "",
    "verl/workers/rollout/vllm_rollout/_private.py": "raise SystemExit('never imported')\n",
    "verl/checkpoint_engine/__init__.py": "",
    "verl/checkpoint_engine/base.py": "",
    "vllm/__init__.py": "",
    "vllm/entrypoints/__init__.py": "",
    "vllm/entrypoints/llm.py": "raise ImportError('libcuda.so.1: cannot open shared object file')\n",
}


def env_with(path: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(path)}


def test_the_module_list_comes_from_the_installed_verl_and_failures_are_named(tmp_path: Path) -> None:
    root = tree(tmp_path, VERL_09)
    result = run_probe(Path(sys.executable), "vllm", 120, env_with(root))
    outcome = {m.module: m.outcome for m in result.modules}
    assert list(outcome)[:4] == [
        "verl",
        "verl.trainer.main_ppo",
        "verl.workers.engine_workers",
        "verl.workers.rollout.vllm_rollout.vllm_async_server",
    ]
    assert "verl.workers.fsdp_workers" not in outcome  # this verl has none
    assert "verl.workers.rollout.vllm_rollout._private" not in outcome
    assert outcome["verl.checkpoint_engine.base"] == "ok"
    assert outcome["verl.workers.engine_workers"] == "failed"
    assert outcome["vllm.entrypoints.llm"] == "gpu"  # needs libcuda.so.1: not a failure here
    failed = result.failures()
    assert [m.module for m in failed] == ["verl.workers.engine_workers"]
    assert failed[0].missing == "fastapi_missing_here"
    assert "missing module fastapi_missing_here (not installed)" in failed[0].line()
    assert not result.ok
    assert result.summary().startswith(
        f"{sum(o == 'ok' for o in outcome.values())} imported, 1 need a GPU, 1 failed"
    )


def test_a_hanging_import_is_cut_at_the_timeout_and_named(tmp_path: Path) -> None:
    root = tree(tmp_path, {**VERL_09, "verl/trainer/main_ppo.py": "import time\ntime.sleep(600)\n"})
    result = run_probe(Path(sys.executable), "vllm", 5, env_with(root))
    assert result.timed_out_in == "verl.trainer.main_ppo"
    assert [m.module for m in result.modules] == ["verl"]
    assert "timed out importing verl.trainer.main_ppo" in result.summary()


def test_uv_failures_are_explained_by_package_and_cause() -> None:
    conflict = (
        "  x No solution found when resolving dependencies:\n"
        "  `-> Because vllm==0.24.0 depends on torch==2.11.0 and you require torch==2.10.0, we can conclude "
        "that your requirements are unsatisfiable.\n"
    )
    assert explain_failure(conflict).startswith(
        "the pins conflict: `-> Because vllm==0.24.0 depends on torch"
    )
    offline = "error: Failed to fetch: `https://example.invalid/simple/six/`\n  Caused by: dns error\n"
    assert "could not be reached" in explain_failure(offline)


def test_a_module_the_row_declares_gpu_only_counts_as_gpu_without_a_driver(tmp_path: Path) -> None:
    """As sglang 0.4.6.post5, which falls back to vLLM's kernels when torch sees no CUDA."""
    files = {**VERL_09, "verl/workers/engine_workers.py": "import vllm_fallback_kernels\n"}
    root = tree(tmp_path, files)
    declared = {"verl.workers.engine_workers": "imports a fallback without CUDA (row evidence)"}
    result = run_probe(Path(sys.executable), "vllm", 120, env_with(root), gpu_only=declared)
    (module,) = [m for m in result.modules if m.module == "verl.workers.engine_workers"]
    assert module.outcome == "gpu"
    assert "(matrix: imports a fallback without CUDA (row evidence))" in module.error
    assert result.ok


MEGATRON = {
    "verl/__init__.py": "",
    "verl/trainer/__init__.py": "",
    "verl/trainer/main_ppo.py": "",
    "verl/workers/__init__.py": "",
    "verl/workers/megatron_workers.py": "import transformer_engine.pytorch\n",
    # As verl 0.9.1: the engine package's own __init__ imports TransformerEngine.
    "verl/workers/engine/__init__.py": "import transformer_engine.pytorch\n",
    "verl/workers/engine/megatron/__init__.py": "",
    "megatron/__init__.py": "",
    "megatron/core/__init__.py": "",
    # As TransformerEngine's Python wheel without its torch extension (transformer-engine-torch).
    "transformer_engine/__init__.py": "",
    "transformer_engine/pytorch/__init__.py": "import transformer_engine_torch\n",
}

# As TransformerEngine 2.16.1 really fails when its torch library is missing (make prove).
MEGATRON_TE_RAISES = {
    **MEGATRON,
    "transformer_engine/pytorch/__init__.py": (
        "raise FileNotFoundError('Could not find shared object file for Transformer Engine torch lib.')\n"
    ),
}


def test_a_megatron_row_probes_megatron_core_and_transformer_engine(tmp_path: Path) -> None:
    root = tree(tmp_path, MEGATRON)
    result = run_probe(Path(sys.executable), "none", 120, env_with(root))
    outcome = {m.module: m.outcome for m in result.modules}
    assert outcome["megatron.core"] == "ok"
    assert outcome["transformer_engine"] == "ok"
    assert outcome["transformer_engine.pytorch"] == "failed"  # nobody said it was left out
    assert outcome["verl.workers.megatron_workers"] == "failed"
    assert outcome["verl.workers.engine.megatron"] == "failed"  # probed although its parent fails
    assert "verl.utils.megatron_utils" not in outcome  # this verl has none
    assert "apex" not in outcome  # not installed: not probed
    assert not result.ok


def test_a_torch_extension_left_out_on_purpose_is_absent_not_failed(tmp_path: Path) -> None:
    root = tree(tmp_path, MEGATRON)
    why = "transformer-engine-torch left out (--without transformer-engine-torch)"
    result = run_probe(
        Path(sys.executable), "none", 120, env_with(root), left_out={"transformer_engine_torch": why}
    )
    by_name = {m.module: m for m in result.modules}
    assert by_name["transformer_engine.pytorch"].outcome == "absent"
    assert by_name["verl.workers.megatron_workers"].outcome == "absent"
    assert why in by_name["transformer_engine.pytorch"].error
    assert result.ok
    assert "4 left out on purpose" in result.summary()  # TE, its torch library, the workers, the engine


def test_transformer_engines_own_error_for_its_missing_torch_library_counts_as_left_out(
    tmp_path: Path,
) -> None:
    root = tree(tmp_path, MEGATRON_TE_RAISES)
    why = "transformer-engine-torch left out (--without transformer-engine-torch)"
    modules = {"transformer_engine_torch": why, "transformer_engine.pytorch": why}
    result = run_probe(Path(sys.executable), "none", 120, env_with(root), left_out=modules)
    by_name = {m.module: m for m in result.modules}
    assert by_name["transformer_engine.pytorch"].outcome == "absent"
    assert by_name["verl.workers.megatron_workers"].outcome == "absent"  # fails inside it
    assert "FileNotFoundError" in by_name["verl.workers.megatron_workers"].error
    assert result.ok
    unrelated = run_probe(Path(sys.executable), "none", 120, env_with(root))
    assert not unrelated.ok  # the same error with nothing left out is a failure


def test_a_package_left_out_entirely_is_still_named_in_the_report(tmp_path: Path) -> None:
    files = {k: v for k, v in MEGATRON.items() if not k.startswith("transformer_engine/")}
    files["verl/workers/megatron_workers.py"] = ""
    root = tree(tmp_path, files)
    why = "transformer-engine-torch left out (--without transformer-engine-torch)"
    result = run_probe(
        Path(sys.executable), "none", 120, env_with(root), left_out={"transformer_engine": why}
    )
    by_name = {m.module: m for m in result.modules}
    assert by_name["megatron.core"].outcome == "ok"
    assert by_name["transformer_engine"].outcome == "absent"
    assert why in by_name["transformer_engine"].error
    assert result.ok


# The bridges, as their releases read a Hugging Face config: Megatron-Bridge 0.5.0 through
# rope_theta_from_hf (legacy attribute or transformers 5's rope_parameters), mbridge 0.15.1's
# LLMBridge._get_gptmodel_args through `rotary_base=self.hf_config.rope_theta` (llm_bridge.py:124).
# transformers 5's Qwen2Config keeps the base in rope_parameters and has no rope_theta attribute.
BRIDGES = {
    **MEGATRON,
    "transformer_engine/pytorch/__init__.py": "",
    "transformers/__init__.py": (
        "class Qwen2Config:\n"
        "    def __init__(self, **kw):\n"
        "        self.__dict__.update(kw)\n"
        "        self.rope_parameters = {'rope_type': 'default', 'rope_theta': 1000000.0}\n"
    ),
    "megatron/bridge/__init__.py": (
        "class _Provider:\n"
        "    def __init__(self, c):\n"
        "        self.num_layers, self.hidden_size = c.num_hidden_layers, c.hidden_size\n"
        "        self.rotary_base = c.rope_parameters['rope_theta']\n"
        "class AutoBridge:\n"
        "    def __init__(self, c): self.c = c\n"
        "    @classmethod\n"
        "    def from_hf_config(cls, c): return cls(c)\n"
        "    def to_megatron_provider(self, load_weights=True): return _Provider(self.c)\n"
    ),
    "mbridge/core/__init__.py": "",
    "mbridge/core/parallel_states.py": "class ParallelStates:\n    pass\n",
    "mbridge/__init__.py": (
        "class _Config:\n"
        "    def __init__(self, c): self.num_layers, self.hidden_size = c.num_hidden_layers, c.hidden_size\n"
        "class AutoBridge:\n"
        "    def __init__(self, c): self.hf_config, self.config = c, _Config(c)\n"
        "    @classmethod\n"
        "    def from_config(cls, c, parallel_states=None): return cls(c)\n"
        "    def _get_gptmodel_args(self): return dict(rotary_base=self.hf_config.rope_theta)\n"
    ),
}


def test_each_bridge_must_read_a_tiny_hf_config_and_mbridge_0_15_s_rope_theta_fails(tmp_path: Path) -> None:
    result = run_probe(Path(sys.executable), "none", 120, env_with(tree(tmp_path, BRIDGES)))
    by_name = {m.module: m for m in result.modules}
    assert by_name["megatron.bridge"].outcome == "ok"
    assert by_name["megatron.bridge:AutoBridge.from_hf_config"].outcome == "ok"
    assert by_name["mbridge"].outcome == "ok"  # it imports; only reading a config fails
    failed = by_name["mbridge:AutoBridge.from_config"]
    assert failed.outcome == "failed"
    assert "rope_theta" in failed.error


def engine_config(vanilla: str) -> dict[str, str]:
    """verl's verl/trainer/config/engine/megatron.yaml, as its releases ship it (the lines that
    choose the bridge): 0.9.1 says vanilla_mbridge: False (Megatron-Bridge), 0.8.0 says True."""
    return {
        "verl/trainer/config/engine/megatron.yaml": (
            "# oc.select: default val for ref.megatron.use_mbridge\nuse_mbridge: True\n\n"
            f"# oc.select: default val for ref.megatron.vanilla_mbridge\nvanilla_mbridge: {vanilla}\n"
        )
    }


def test_verls_default_bridge_is_probed_first_and_its_config_read_before_the_other(tmp_path: Path) -> None:
    for vanilla, first in (("False", "megatron.bridge"), ("True", "mbridge")):
        root = tree(tmp_path / vanilla, {**BRIDGES, **engine_config(vanilla)})
        names = [m.module for m in run_probe(Path(sys.executable), "none", 120, env_with(root)).modules]
        bridges = [n for n in names if n.split(":")[0] in ("megatron.bridge", "mbridge")]
        assert bridges[0] == first
        checks = [n for n in bridges if ":" in n]
        assert checks[0].startswith(first + ":")
        assert len(checks) == 2  # the other installed bridge is still checked


def test_a_row_without_verls_default_bridge_fails_the_probe(tmp_path: Path) -> None:
    """Audit 2026-12-b D1: a verl 0.9 Megatron row without Megatron-Bridge passed the probe, which
    skipped a bridge that was not installed; verl's first model build then raised ImportError."""
    files = {k: v for k, v in BRIDGES.items() if not k.startswith("megatron/bridge/")}
    files.update(
        {  # as verl's own modules of each bridge (verl 0.8.0 and 0.9.1)
            "verl/models/__init__.py": "",
            "verl/models/mcore/__init__.py": "",
            "verl/models/mcore/bridge.py": "from megatron.bridge import AutoBridge\n",
            "verl/models/mcore/mbridge.py": "from mbridge import AutoBridge\n",
        }
    )
    files["mbridge/__init__.py"] = files["mbridge/__init__.py"].replace(
        "rotary_base=self.hf_config.rope_theta", "rotary_base=self.hf_config.rope_parameters['rope_theta']"
    )  # a fixed mbridge (git 641a5a0 reads rope_parameters): only the missing default fails
    root = tree(tmp_path, {**files, **engine_config("False")})
    result = run_probe(Path(sys.executable), "none", 120, env_with(root))
    by_name = {m.module: m for m in result.modules}
    assert by_name["megatron.bridge"].outcome == "failed"
    assert "verl's default bridge" in by_name["megatron.bridge"].error
    assert "vanilla_mbridge: False" in by_name["megatron.bridge"].error
    assert by_name["mbridge:AutoBridge.from_config"].outcome == "ok"
    assert [m.module for m in result.failures()] == ["megatron.bridge", "verl.models.mcore.bridge"]
    # verl 0.8 (mbridge by default) without mbridge: a failure, unless it was left out on purpose.
    # Its verl.models.mcore.bridge (Megatron-Bridge's path, not the default) is not probed.
    files_08 = {k: v for k, v in files.items() if not k.startswith("mbridge/")}
    root = tree(tmp_path / "0.8", {**files_08, **engine_config("True")})
    missing = run_probe(Path(sys.executable), "none", 120, env_with(root))
    assert [m.module for m in missing.failures()] == ["mbridge", "verl.models.mcore.mbridge"]
    assert "verl.models.mcore.bridge" not in {m.module for m in missing.modules}
    why = "mbridge left out (--without mbridge)"
    left = run_probe(Path(sys.executable), "none", 120, env_with(root), left_out={"mbridge": why})
    assert {m.module: m.outcome for m in left.modules}["mbridge"] == "absent"
    assert left.ok
