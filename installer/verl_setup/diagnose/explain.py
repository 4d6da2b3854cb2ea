"""Turn the lines a class matched into a finding (the dispatch, and the launch classes: Hydra,
imports): what happened, with the figures the log
printed, and what to change, in verl's own config keys. Nothing here guesses a figure the log
does not show."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence

from verl_setup.diagnose.explain_accel import EXPLAINERS as ACCELERATOR_EXPLAINERS
from verl_setup.diagnose.explain_accel import cann_missing
from verl_setup.diagnose.explain_cluster import nccl_connect, nccl_timeout, resource_wait, worker_died
from verl_setup.diagnose.explain_memory import cuda_oom, kernel_oom, kv_cache, ray_memory
from verl_setup.diagnose.explain_runtime import crash_signal, gpu_memory_busy, nccl_error, ray_gcs
from verl_setup.diagnose.finding import LogFinding, evidence_of
from verl_setup.diagnose.rules import BY_ID, ClassId
from verl_setup.diagnose.scan import Hit

_OVERRIDE = re.compile(r"Could not override '(?P<key>[^']+)'")
_STRUCT = re.compile(r"Key '(?P<leaf>[^']+)' is not in struct")
_FULL = re.compile(r"full_key: (?P<full>\S+)")


def hydra(hits: Sequence[Hit]) -> LogFinding:
    """A Hydra/OmegaConf error: the key it could not set, or the override it could not parse."""
    facts: dict[str, str] = {}
    for hit in hits:
        for line in (hit.text, *hit.after[:4]):
            for pattern in (_OVERRIDE, _STRUCT, _FULL):
                if (m := pattern.search(line)) and not set(m.groupdict()) & set(facts):
                    facts.update(m.groupdict())
    key = facts.get("key") or facts.get("full") or facts.get("leaf")
    grammar = any(
        w in h.text for h in hits for w in ("OverrideParseException", "no viable alternative at input")
    )
    if grammar:
        summary = "Hydra could not parse an override"
        remedy: tuple[str, ...] = (
            "an override's value is not Hydra grammar: quote lists and strings with brackets, commas or "
            "spaces (key='[a,b]'), and close every bracket",
            "`verl-setup doctor --check launch -- <launch>` parses the overrides before launch",
        )
    else:
        summary = (
            f"Hydra rejected the key {key!r}: it is not in this verl's config"
            if key
            else "Hydra rejected the config"
        )
        remedy = (
            f"{key or 'the key'} is not in the installed verl's config (keys move between releases): "
            "check its "
            "spelling against verl/trainer/config/ppo_trainer.yaml of that release; a leading + adds a key "
            "that verl then ignores",
            "`verl-setup doctor --check launch -- <launch>` checks every override against the target's "
            "config",
        )
    return LogFinding(
        cls="hydra", tier=0, summary=summary, evidence=evidence_of(hits), remedy=remedy, facts=facts
    )


_MODULE = re.compile(r"No module named '(?P<module>[^']+)'")
_SYMBOL = re.compile(r"undefined symbol: (?P<symbol>\S+)")
_ATN = re.compile(r"Could not deserialize ATN with version \d+ \(expected \d+\)")


def import_error(hits: Sequence[Hit]) -> LogFinding:
    """A module that does not import: `verify` would have caught it before launch."""
    if (cann := cann_missing(hits)) is not None:  # an Ascend env without CANN's libraries
        return cann
    text = hits[0].text
    facts: dict[str, str] = {}
    if m := _MODULE.search(text):
        facts["module"] = m["module"]
        summary = f"Python could not import {m['module']!r}"
    elif a := _ATN.search(text):
        facts["antlr4"] = a[0]
        summary = (
            "an import failed because a package moved after install: antlr4-python3-runtime is not the "
            f"version omegaconf/hydra's parser was generated for ({a[0]})"
        )
    elif s := _SYMBOL.search(text):
        facts["symbol"] = s["symbol"][:120]
        summary = "a compiled extension does not load (undefined symbol: built against another torch)"
    else:
        summary = "an import failed: " + text.strip()[:200]
    remedy = (
        "`verl-setup verify --prefix ENV` names what changed since install (a moved pin, a missing "
        "package) and imports verl, the engine and the compiled extensions in that environment (with "
        "--ray-address, on every Ray node); `verl-setup doctor` checks the pins in a second",
        "install the row's exact pins (`verl-setup install`) rather than adding packages by hand",
    )
    return LogFinding(
        cls="import-error", tier=0, summary=summary, evidence=evidence_of(hits), remedy=remedy, facts=facts
    )


def explain(
    cls: ClassId,
    hits: Sequence[Hit],
    session_logs: Sequence[str],
    *,
    as_verdict: bool,
    context: Mapping[str, Sequence[Hit]] | None = None,
) -> LogFinding:
    """The finding for one class from its hits (in reading order); `context` holds the lines of
    the context rules (the launch line)."""
    simple: dict[str, Callable[[Sequence[Hit]], LogFinding]] = {
        "ray-memory-monitor": ray_memory, "kernel-oom": kernel_oom,
        "kv-cache-memory": kv_cache, "nccl-connect": nccl_connect, "resource-wait": resource_wait,
        "hydra": hydra, "import-error": import_error, "ray-gcs": ray_gcs, "gpu-memory-busy": gpu_memory_busy,
        "crash-signal": crash_signal, "nccl-error": nccl_error, **ACCELERATOR_EXPLAINERS,
    }  # fmt: skip
    if cls == "cuda-oom":
        return cuda_oom(hits, (context or {}).get("launch-line", ()))
    if cls == "nccl-timeout":
        return nccl_timeout(hits, as_verdict=as_verdict, launch=(context or {}).get("launch-line", ()))
    if cls == "worker-died":
        return worker_died(hits, session_logs, as_verdict=as_verdict)
    finding = simple[cls](hits)
    assert finding.tier == BY_ID[cls].tier  # noqa: S101  # the rules table and this module agree
    return finding
