"""The import probe: imports what a training run of the installed verl imports.

Run by path in the target interpreter by environment/import_probe.py (JSON lines on stdout) and
shipped as the rendered verl-setup-probe.py (`--report`: words on stderr, exit 1 on a failure).
Standard library only; one process, so torch loads once; each module is announced before it is
imported, so a hang names its module.

argv: ENGINE [--report|-] [GPU_ONLY_JSON] [LEFT_OUT_JSON] [KNOWN_JSON]
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import json
import os
import pkgutil
import re
import sys
import time
import traceback
from collections.abc import Callable
from typing import Any

engine = sys.argv[1] if len(sys.argv) > 1 else "none"
report = sys.argv[2:3] == ["--report"]  # for rendered scripts: words on stderr, exit 1 on a failure
# The row's modules that only import with an NVIDIA driver (module -> why); only without one.
declared: dict[str, str] = json.loads(sys.argv[3]) if len(sys.argv) > 3 else {}
# Modules of packages the install left out on purpose (--without NAME): module -> why.
left_out: dict[str, str] = json.loads(sys.argv[4]) if len(sys.argv) > 4 else {}
# Imports the row records as a known issue (import -> the issue): reported, not a failure.
known: dict[str, str] = json.loads(sys.argv[5]) if len(sys.argv) > 5 else {}
try:
    import ctypes

    ctypes.CDLL("libcuda.so.1")
    declared = {}
except OSError:
    pass
# Words in a traceback that say the import needs an NVIDIA driver (or a GPU), not a broken package.
GPU_SIGNS: tuple[str, ...] = ("libcuda.so", "libnvidia-ml", "NVIDIA driver", "no NVIDIA GPU", "CUDA driver")
GPU_SIGNS += ("cudaGetDeviceCount", "nvmlInit", "No CUDA GPUs", "libnvrtc", "Found no NVIDIA")
# --report's word for each outcome other than "absent" and "known" (their own words).
WORDS = {"ok": "ok", "gpu": "gpu (needs an NVIDIA driver)", "failed": "FAILED"}


def exists(name: str) -> bool:
    # Found on disk below its top-level package, without importing the parents (a parent's own
    # import may fail, and that failure belongs to the probe of that module, not to this test).
    top, _, rest = name.partition(".")
    try:
        spec = importlib.util.find_spec(top)
    except Exception:
        return False
    if spec is None or not rest:
        return spec is not None
    folders = list(spec.submodule_search_locations or [])
    parts = rest.split(".")
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        found = [os.path.join(f, part) for f in folders if os.path.isdir(os.path.join(f, part))]
        if last and (found or any(os.path.isfile(os.path.join(f, part + ".py")) for f in folders)):
            return True
        if not found:
            return False
        folders = found
    return False


def children(package: str) -> list[str]:
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return []
    if spec is None or not spec.submodule_search_locations:
        return []
    return [
        package + "." + m.name
        for m in pkgutil.iter_modules(spec.submodule_search_locations)
        if not m.name.startswith("_")
    ]


modules = ["verl", "verl.trainer.main_ppo"]
for name in (
    "verl.workers.fsdp_workers",
    "verl.workers.engine_workers",
    "verl.trainer.fsdp_sft_trainer",
    "verl.trainer.sft_trainer",
    "verl.utils.dataset.rl_dataset",
):
    if exists(name):
        modules.append(name)
if engine != "none":
    modules += children("verl.workers.rollout.%s_rollout" % engine)
    for name in ("verl.checkpoint_engine.base", "verl.checkpoint_engine.nccl_checkpoint_engine"):
        if exists(name):
            modules.append(name)
    modules.append(engine)
    if engine == "sglang":
        modules.append("sglang.srt.entrypoints.engine")
    else:
        modules.append("vllm.entrypoints.llm")
# What verl's modules import anyway, named on their own so a broken one is reported by name
# (a missing one already fails the verl modules above).
for name in ("flashinfer", "flash_attn", "sgl_kernel", "datasets", "ray", "tensordict", "transformers"):
    if exists(name):
        modules.append(name)


# The bridge this verl builds Megatron models with, from its own engine/megatron.yaml:
# use_mbridge with vanilla_mbridge False is Megatron-Bridge (verl 0.9's default), True is mbridge
# (verl 0.8's). None where the file or the keys are missing (an older verl) or use_mbridge is off.
def default_bridge() -> tuple[str, str] | None:
    spec = importlib.util.find_spec("verl")
    for folder in (spec.submodule_search_locations or []) if spec else []:
        path = os.path.join(folder, "trainer", "config", "engine", "megatron.yaml")
        if os.path.isfile(path):
            with open(path, encoding="utf-8") as f:
                text = f.read()
            keys = dict(re.findall(r"(?m)^(use_mbridge|vanilla_mbridge):\s*(\w+)", text))
            if keys.get("use_mbridge") != "True" or "vanilla_mbridge" not in keys:
                return None
            return ("mbridge" if keys["vanilla_mbridge"] == "True" else "megatron.bridge"), (
                "verl's default bridge (verl/trainer/config/engine/megatron.yaml: vanilla_mbridge: %s)"
                % keys["vanilla_mbridge"]
            )
    return None


# The Megatron backend, where it is installed: what verl's Megatron workers import.
default = default_bridge() if exists("megatron.core") else None
if exists("megatron.core"):
    for name in ("megatron.core", "transformer_engine", "transformer_engine.pytorch", "apex"):
        if exists(name):
            modules.append(name)
    # The HF <-> Megatron bridges, verl's default first; the default is probed even when it is
    # not installed, so a row that lacks it fails here instead of at the first model build.
    bridges = ["megatron.bridge", "mbridge"]
    bridges.sort(key=lambda b: b != (default[0] if default else None))
    modules += [b for b in bridges if exists(b) or (default and b == default[0])]
    # verl's module of each bridge only where that bridge is installed or is the default: verl
    # 0.8's verl.models.mcore.bridge imports megatron.bridge, which its default path never loads.
    for name, needs in (
        ("verl.models.mcore.bridge", "megatron.bridge"),
        ("verl.models.mcore.mbridge", "mbridge"),
        ("verl.workers.megatron_workers", None),
        ("verl.workers.engine.megatron", None),
        ("verl.utils.megatron_utils", None),
    ):
        if exists(name) and (needs is None or needs in modules):
            modules.append(name)


# The bridges on the CPU: each reads a tiny Hugging Face config into Megatron's terms, the step
# where PyPI's mbridge 0.15.1 raises AttributeError on transformers 5 (rope_theta moved into
# rope_parameters). mbridge's _get_gptmodel_args is what its get_model passes to GPTModel.
def tiny_config() -> tuple[Any, Any]:
    from transformers import Qwen2Config  # type: ignore[import-not-found, unused-ignore]

    cfg = Qwen2Config(
        vocab_size=256,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=128,
    )
    cfg.architectures = ["Qwen2ForCausalLM"]
    base = (getattr(cfg, "rope_parameters", None) or {}).get("rope_theta") or cfg.__dict__.get("rope_theta")
    return cfg, base


def check_megatron_bridge() -> tuple[tuple[Any, ...], tuple[Any, ...]]:
    from megatron.bridge import AutoBridge  # type: ignore[import-not-found, unused-ignore]

    cfg, base = tiny_config()
    p = AutoBridge.from_hf_config(cfg).to_megatron_provider(load_weights=False)
    return (p.num_layers, p.hidden_size, p.rotary_base), (2, 64, base)


def check_mbridge() -> tuple[tuple[Any, ...], tuple[Any, ...]]:
    import mbridge  # type: ignore[import-not-found, unused-ignore]
    from mbridge.core.parallel_states import ParallelStates  # type: ignore[import-not-found, unused-ignore]

    cfg, base = tiny_config()
    # One process, no torch.distributed: the parallel sizes are given (1 each), not read from Megatron.
    bridge = mbridge.AutoBridge.from_config(cfg, parallel_states=ParallelStates())
    return (
        bridge.config.num_layers,
        bridge.config.hidden_size,
        bridge._get_gptmodel_args()["rotary_base"],
    ), (2, 64, base)


CHECKS: dict[str, Callable[[], tuple[tuple[Any, ...], tuple[Any, ...]]]] = {
    "megatron.bridge:AutoBridge.from_hf_config": check_megatron_bridge,
    "mbridge:AutoBridge.from_config": check_mbridge,
}
for name in sorted(CHECKS, key=lambda n: n.split(":")[0] != (default[0] if default else None)):
    if name.split(":")[0] in modules and exists(name.split(":")[0]):
        modules.append(name)
# What was left out on purpose is named too, so the report says so instead of staying silent.
modules += [name for name in left_out if name not in modules]
# One shard of several processes run at once (VERL_SETUP_PROBE_SHARD="i/n", set by the parent on
# a host with cores to spare): each imports every n-th module, so the wall time is close to the
# slowest single import; the engine patches' static check runs in shard 0 only.
shard = os.environ.get("VERL_SETUP_PROBE_SHARD", "")
if shard:
    index, count = (int(part) for part in shard.split("/"))
    modules = modules[index::count]
try:
    import importlib.metadata as md

    owners: dict[str, list[str]] = dict(md.packages_distributions())
except Exception:
    owners = {}
failures: list[str] = []


def check(name: str) -> object:
    if default and name == default[0] and not exists(name):
        raise ModuleNotFoundError("%s is %s, and it is not installed" % (name, default[1]), name=name)
    if name not in CHECKS:
        return importlib.import_module(name)
    got, want = CHECKS[name]()
    if got != want:
        raise AssertionError("read %r from a tiny Qwen2 config, expected %r" % (got, want))
    return None


def attempt(name: str, action: Callable[[], object]) -> None:
    if not report:
        sys.stdout.write(json.dumps({"start": name}) + "\n")
        sys.stdout.flush()
    t = time.monotonic()
    out: dict[str, Any]
    try:
        action()
        out = {"module": name, "outcome": "ok"}
    except BaseException as exc:
        text = "".join(traceback.format_exception_only(type(exc), exc)).strip().splitlines()[-1]
        full = traceback.format_exc()
        missing = getattr(exc, "name", None) if isinstance(exc, ModuleNotFoundError) else None
        top = (missing or "").split(".")[0]
        dist = ",".join(owners.get(top, [])) or None
        why = declared.get(name)
        sign = next((ln.strip() for ln in full.splitlines() if any(s in ln for s in GPU_SIGNS)), None)
        gpu = why is not None or sign is not None
        # Left out on purpose: the module itself, the module found missing, or a frame inside it
        # (TransformerEngine raises FileNotFoundError for its missing torch library).
        skipped = (
            left_out.get(name)
            or left_out.get(missing or "")
            or left_out.get(top)
            or next(
                (
                    why
                    for mod, why in left_out.items()
                    if "/%s/" % mod.replace(".", "/") in full or "/%s.py" % mod.replace(".", "/") in full
                ),
                None,
            )
        )
        # Name what needs the driver (the last line may be a later error raised in its place).
        text = "%s (matrix: %s)" % (text, why) if why else (sign[:300] if sign else text)
        outcome = "absent" if skipped else "gpu" if gpu else "known" if name in known else "failed"
        if outcome == "absent":
            text = "left out on purpose: %s (%s)" % (skipped, text)
        if outcome == "known":
            text = "known issue of the row: %s (%s)" % (known[name], text)
        out = {
            "module": name,
            "outcome": outcome,
            "error": text[:400],
            "missing": missing,
            "distribution": dist,
        }
    out["seconds"] = round(time.monotonic() - t, 2)
    if report:
        word = WORDS.get(out["outcome"], out["outcome"])
        detail = out.get("error", "")
        if out.get("missing"):
            owner = out["distribution"] or "not installed"
            detail = "missing module %s (%s): %s" % (out["missing"], owner, detail)
        sys.stderr.write("import probe: %s %s %s\n" % (word, name, detail))
        if out["outcome"] == "failed":
            failures.append(name)
    else:
        sys.stdout.write(json.dumps(out) + "\n")
        sys.stdout.flush()


for name in modules:
    attempt(name, lambda name=name: check(name))  # type: ignore[misc]


# verl's patches of the engine import it inside functions, so importing them passes whatever the
# engine has: each unguarded `from ENGINE.X import NAME` in them is checked against the installed
# engine's source, statically (no engine import, so no GPU needed): verl 0.9.1's QAT and NVFP4
# patches import names vLLM 0.31 removed (audit 2026-12-b D3). Imports inside a `try` that
# catches ImportError are the patch's own fallback and are not checked.
def source_of(module: str) -> str | None:
    top, _, rest = module.partition(".")
    spec = importlib.util.find_spec(top)
    folders = list(spec.submodule_search_locations or []) if spec else []
    if spec is None or not rest:
        return spec.origin if spec else None
    for part in rest.split("."):
        found = [os.path.join(f, part) for f in folders if os.path.isdir(os.path.join(f, part))]
        files = [
            os.path.join(f, part + ".py") for f in folders if os.path.isfile(os.path.join(f, part + ".py"))
        ]
        if not found:
            return files[0] if files and part == rest.split(".")[-1] else None
        folders = found
    inits = [
        os.path.join(f, "__init__.py") for f in folders if os.path.isfile(os.path.join(f, "__init__.py"))
    ]
    return inits[0] if inits else None


def defines(tree: ast.Module, attr: str) -> bool:
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == attr:
            return True
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == attr for t in targets):
                return True
        if isinstance(node, (ast.Import, ast.ImportFrom)) and any(
            (a.asname or a.name.split(".")[0]) == attr for a in node.names
        ):
            return True
        if isinstance(node, ast.FunctionDef) and node.name == "__getattr__":
            return True  # a module-level __getattr__ may serve any name
    return any(
        isinstance(n, (ast.If, ast.Try))
        and defines(ast.Module(body=getattr(n, "body", []), type_ignores=[]), attr)
        for n in tree.body
    )


def read_tree(path: str) -> ast.Module:
    with open(path, encoding="utf-8") as f:
        return ast.parse(f.read())


def lazy_name(module: str, attr: str) -> None:
    path = source_of(module)
    if path is None:
        raise ModuleNotFoundError("no module named %r in the installed %s" % (module, engine), name=module)
    here = os.path.dirname(path)
    if path.endswith("__init__.py") and (
        os.path.isdir(os.path.join(here, attr)) or os.path.isfile(os.path.join(here, attr + ".py"))
    ):
        return  # a submodule
    if not defines(read_tree(path), attr):
        raise ImportError("cannot import name %r from %r (%s)" % (attr, module, path))


def guarded(tree: ast.Module) -> set[int]:
    out: set[int] = set()
    for node in ast.walk(tree):
        catches = ("ImportError", "ModuleNotFoundError", "Exception")
        if isinstance(node, ast.Try) and any(
            h.type is None or any(isinstance(n, ast.Name) and n.id in catches for n in ast.walk(h.type))
            for h in node.handlers
        ):
            out.update(id(n) for stmt in node.body for n in ast.walk(stmt))
    return out


PATCHES = {"vllm": ("verl.utils.qat.vllm_patch", "verl.utils.modelopt.vllm_modelopt_patch")}
for patch in PATCHES.get(engine, ()) if not shard or shard.startswith("0/") else ():
    tree: ast.Module | None
    try:
        origin = source_of(patch) if exists(patch) else None
        tree = read_tree(origin) if origin else None
    except Exception:
        tree = None  # the module's own import is probed above
    skip = guarded(tree) if tree else set()
    names: list[tuple[str, str]] = []
    for node in ast.walk(tree) if tree else ():
        if (
            isinstance(node, ast.ImportFrom)
            and not node.level
            and id(node) not in skip
            and (node.module or "").split(".")[0] == engine
        ):
            names += [(node.module or "", a.name) for a in node.names if (node.module, a.name) not in names]
    for module, attr in names:
        attempt("%s -> %s.%s" % (patch, module, attr), lambda m=module, a=attr: lazy_name(m, a))  # type: ignore[misc]
if report:
    sys.exit(1 if failures else 0)
