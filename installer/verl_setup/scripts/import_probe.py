"""The import probe's child: imports what a training run of the installed verl imports.

Run by environment/probe.py (JSON lines on stdout) and embedded in the rendered
verl-setup-probe.py (`--report`: words on stderr, exit 1 on a failure).
"""

# Runs in the target interpreter: standard library only. One process, so torch loads once; each
# module is announced before it is imported, so a hang names its module.
CHILD = r"""
import importlib, importlib.util, json, os, pkgutil, sys, time, traceback
engine = sys.argv[1] if len(sys.argv) > 1 else "none"
report = sys.argv[2:3] == ["--report"]  # for rendered scripts: words on stderr, exit 1 on a failure
# The row's modules that only import with an NVIDIA driver (module -> why); only without one.
declared = json.loads(sys.argv[3]) if len(sys.argv) > 3 else {}
# Modules of packages the install left out on purpose (--without NAME): module -> why.
left_out = json.loads(sys.argv[4]) if len(sys.argv) > 4 else {}
try:
    import ctypes
    ctypes.CDLL("libcuda.so.1")
    declared = {}
except OSError:
    pass
GPU_SIGNS = ("libcuda.so", "libnvidia-ml", "NVIDIA driver", "no NVIDIA GPU", "CUDA driver",
             "cudaGetDeviceCount", "nvmlInit", "No CUDA GPUs", "libnvrtc", "Found no NVIDIA")
def exists(name):
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
def children(package):
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return []
    if spec is None or not spec.submodule_search_locations:
        return []
    return [package + "." + m.name for m in pkgutil.iter_modules(spec.submodule_search_locations)
            if not m.name.startswith("_")]
modules = ["verl", "verl.trainer.main_ppo"]
for name in ("verl.workers.fsdp_workers", "verl.workers.engine_workers", "verl.trainer.fsdp_sft_trainer",
             "verl.trainer.sft_trainer", "verl.utils.dataset.rl_dataset"):
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
# The Megatron backend, where it is installed: what verl's Megatron workers import.
if exists("megatron.core"):
    for name in ("megatron.core", "transformer_engine", "transformer_engine.pytorch", "apex",
                 "verl.workers.megatron_workers", "verl.workers.engine.megatron",
                 "verl.utils.megatron_utils"):
        if exists(name):
            modules.append(name)
# What was left out on purpose is named too, so the report says so instead of staying silent.
modules += [name for name in left_out if name not in modules]
try:
    import importlib.metadata as md
    owners = md.packages_distributions()
except Exception:
    owners = {}
failed = False
for name in modules:
    if not report:
        sys.stdout.write(json.dumps({"start": name}) + "\n"); sys.stdout.flush()
    t = time.monotonic()
    try:
        importlib.import_module(name)
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
        skipped = left_out.get(name) or left_out.get(missing or "") or left_out.get(top) or next(
            (why for mod, why in left_out.items()
             if "/%s/" % mod.replace(".", "/") in full or "/%s.py" % mod.replace(".", "/") in full), None)
        # Name what needs the driver (the last line may be a later error raised in its place).
        text = "%s (matrix: %s)" % (text, why) if why else (sign[:300] if sign else text)
        outcome = "absent" if skipped else "gpu" if gpu else "failed"
        if outcome == "absent":
            text = "left out on purpose: %s (%s)" % (skipped, text)
        out = {"module": name, "outcome": outcome, "error": text[:400],
               "missing": missing, "distribution": dist}
    out["seconds"] = round(time.monotonic() - t, 2)
    if report:
        word = {"ok": "ok", "gpu": "gpu (needs an NVIDIA driver)", "failed": "FAILED",
                "absent": "absent"}[out["outcome"]]
        detail = out.get("error", "")
        if out.get("missing"):
            owner = out["distribution"] or "not installed"
            detail = "missing module %s (%s): %s" % (out["missing"], owner, detail)
        sys.stderr.write("import probe: %s %s %s\n" % (word, name, detail))
        failed = failed or out["outcome"] == "failed"
    else:
        sys.stdout.write(json.dumps(out) + "\n"); sys.stdout.flush()
if report:
    sys.exit(1 if failed else 0)
"""
