"""The import probe checks the names verl's engine patches import inside functions.

The stand-in packages below copy the shape of the real ones: verl 0.9.1's
verl/utils/modelopt/vllm_modelopt_patch.py imports ModelOptNvFp4LinearMethod from
vllm.model_executor.layers.quantization.modelopt inside a function, and vLLM 0.31.0's module has
only ModelOptLinearMethod (audit 2026-12-b D3). The real wheels are proven by `matrix prove`.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from verl_setup.environment.import_probe import run_probe

PATCH = """
def patch():
    from vllm.model_executor.layers.quantization.modelopt import ModelOptNvFp4LinearMethod
    from vllm.model_executor.layers.quantization.utils import marlin_utils
    try:
        from vllm.model_executor.layers.gone import fallback
    except ImportError:
        fallback = None
    return ModelOptNvFp4LinearMethod, marlin_utils, fallback
"""
CHECK = "verl.utils.modelopt.vllm_modelopt_patch -> vllm.model_executor.layers.quantization.modelopt."


def stand_ins(root: Path, modelopt: str) -> Path:
    files = {
        "verl/__init__.py": "",
        "verl/utils/__init__.py": "",
        "verl/utils/modelopt/__init__.py": "",
        "verl/utils/modelopt/vllm_modelopt_patch.py": PATCH,
        "vllm/__init__.py": "",
        "vllm/model_executor/__init__.py": "",
        "vllm/model_executor/layers/__init__.py": "",
        "vllm/model_executor/layers/quantization/__init__.py": "",
        "vllm/model_executor/layers/quantization/modelopt.py": modelopt,
        "vllm/model_executor/layers/quantization/utils/__init__.py": "",
        "vllm/model_executor/layers/quantization/utils/marlin_utils.py": "",
    }
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")
    return root


def lazy_results(root: Path, known: dict[str, str] | None = None) -> dict[str, tuple[str, str]]:
    env = {**os.environ, "PYTHONPATH": str(root)}
    result = run_probe(Path(sys.executable), "vllm", 60, env, known=known)
    return {m.module: (m.outcome, m.error) for m in result.modules if " -> " in m.module}


def test_a_name_the_engine_removed_fails_the_probe(tmp_path: Path) -> None:
    root = stand_ins(tmp_path, "class ModelOptLinearMethod:\n    pass\n")
    found = lazy_results(root)
    outcome, error = found[CHECK + "ModelOptNvFp4LinearMethod"]
    assert outcome == "failed"
    assert "cannot import name 'ModelOptNvFp4LinearMethod'" in error
    # A submodule is a name too; an import inside try/except ImportError is the patch's fallback.
    submodule = "verl.utils.modelopt.vllm_modelopt_patch -> vllm.model_executor.layers.quantization.utils."
    assert found[submodule + "marlin_utils"][0] == "ok"
    assert not any("gone" in name for name in found)


def test_the_same_name_present_passes_and_a_known_issue_is_reported_not_failed(tmp_path: Path) -> None:
    root = stand_ins(tmp_path, "from somewhere import x\nclass ModelOptNvFp4LinearMethod:\n    pass\n")
    assert lazy_results(root)[CHECK + "ModelOptNvFp4LinearMethod"][0] == "ok"
    gone = stand_ins(tmp_path / "gone", "class ModelOptLinearMethod:\n    pass\n")
    known = {CHECK + "ModelOptNvFp4LinearMethod": "verl's NVFP4 patch needs a name vLLM removed"}
    outcome, error = lazy_results(gone, known)[CHECK + "ModelOptNvFp4LinearMethod"]
    assert outcome == "known"
    assert "known issue of the row: verl's NVFP4 patch" in error
