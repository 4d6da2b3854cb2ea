"""The CUDA OOM's fragmentation clue: torch says how much it holds reserved but unallocated, and
that PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True avoids fragmentation when that is large
(torch's own OutOfMemoryError text; tests/fixtures/diagnose)."""

from __future__ import annotations

from collections.abc import Mapping

_UNIT = {"KiB": 2**-20, "MiB": 2**-10, "GiB": 1.0}
LARGE_GIB = 1.0  # below this the clue is noise beside the allocation that failed


def gib(text: str) -> float | None:
    """'6.77 GiB' -> 6.77 (None if it is not such a figure)."""
    number, _, unit = text.partition(" ")
    try:
        return float(number) * _UNIT[unit]
    except (ValueError, KeyError):
        return None


def fragmentation_remedy(facts: Mapping[str, str]) -> tuple[str, bool] | None:
    """The expandable_segments remedy and whether it comes first (the reserved-but-unallocated
    memory alone would have covered the allocation), or None when torch names no large reserve."""
    reserved = gib(facts.get("reserved", ""))
    if reserved is None or reserved < LARGE_GIB:
        return None
    want = gib(facts.get("want", ""))
    covers = want is not None and reserved >= want
    why = f" (more than the {facts['want']} asked)" if covers else ""
    return (
        f"PyTorch holds {facts['reserved']} reserved but unallocated{why}: fragmentation; set "
        "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True in the workers' environment (env.sh, or "
        "+ray_kwargs.ray_init.runtime_env.env_vars.PYTORCH_CUDA_ALLOC_CONF), as torch's message says",
        covers,
    )
