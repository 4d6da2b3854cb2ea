"""The launch lint finds a Hub model where huggingface_hub keeps it: its cache rules, refs/main."""

from __future__ import annotations

import os
from pathlib import Path

from verl_setup.doctor.probes.model_files import hub_snapshot

MODEL = "Qwen/Qwen2.5-0.5B-Instruct"


def snapshot(hub: Path, commit: str, mtime: float) -> Path:
    """One snapshot in huggingface_hub's layout: models--ORG--NAME/snapshots/COMMIT/config.json."""
    folder = hub / "models--Qwen--Qwen2.5-0.5B-Instruct" / "snapshots" / commit
    folder.mkdir(parents=True)
    (folder / "config.json").write_text("{}")
    os.utime(folder / "config.json", (mtime, mtime))
    return folder


def test_the_snapshot_refs_main_names_wins_over_a_newer_one(tmp_path: Path) -> None:
    hub = tmp_path / "hf/hub"
    main = snapshot(hub, "a" * 40, mtime=1_000)
    snapshot(hub, "b" * 40, mtime=2_000)  # a download of another revision, later
    refs = hub / "models--Qwen--Qwen2.5-0.5B-Instruct/refs"
    refs.mkdir()
    (refs / "main").write_text("a" * 40)
    assert hub_snapshot(MODEL, {"HF_HOME": str(tmp_path / "hf")}) == main


def test_without_refs_main_the_newest_snapshot_is_taken(tmp_path: Path) -> None:
    hub = tmp_path / "hub"
    snapshot(hub, "a" * 40, mtime=1_000)
    newest = snapshot(hub, "b" * 40, mtime=2_000)
    assert hub_snapshot(MODEL, {"HF_HUB_CACHE": str(hub)}) == newest


def test_xdg_cache_home_and_the_older_hub_variable_are_honoured(tmp_path: Path) -> None:
    xdg = snapshot(tmp_path / "xdg/huggingface/hub", "c" * 40, mtime=1_000)
    env = {"XDG_CACHE_HOME": str(tmp_path / "xdg"), "HOME": str(tmp_path / "home")}
    assert hub_snapshot(MODEL, env) == xdg
    old = snapshot(tmp_path / "old-hub", "d" * 40, mtime=1_000)
    assert hub_snapshot(MODEL, {**env, "HUGGINGFACE_HUB_CACHE": str(tmp_path / "old-hub")}) == old
    assert hub_snapshot(MODEL, {"HOME": str(tmp_path / "home")}) is None
