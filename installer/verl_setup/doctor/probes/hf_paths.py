"""huggingface_hub's documented cache rules applied to an environment: HF_HOME (else
XDG_CACHE_HOME/huggingface, else ~/.cache/huggingface) and the hub cache below it (HF_HUB_CACHE,
else the older HUGGINGFACE_HUB_CACHE, else HF_HOME/hub)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path


def expand(path: str, env: Mapping[str, str]) -> str:
    """`~` as the environment's HOME sees it."""
    if path.startswith("~"):
        return env.get("HOME", str(Path.home())) + path[1:]
    return path


def hf_home(env: Mapping[str, str]) -> str:
    """HF_HOME as huggingface_hub resolves it."""
    xdg = expand(env.get("XDG_CACHE_HOME") or "~/.cache", env)
    return expand(env.get("HF_HOME") or str(Path(xdg) / "huggingface"), env)


def hub_cache(env: Mapping[str, str]) -> str:
    """The hub cache (models--ORG--NAME folders) as huggingface_hub resolves it."""
    hub = env.get("HF_HUB_CACHE") or env.get("HUGGINGFACE_HUB_CACHE") or str(Path(hf_home(env)) / "hub")
    return expand(hub, env)
