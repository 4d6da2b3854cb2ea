"""A prefix is a name, not a pattern: the leftovers of `env[1]`, `e*` or `e?v` are their own,
never a neighbour's (a concurrent install into env1 keeps its staging dir and its parked env)."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

import pytest

from verl_setup.environment.staging import Layout, clean_leftovers, install_lock

DEAD = 2**22 + 17  # above the kernel's default pid_max: no live process has it


def _venv(path: Path, mark: str) -> Path:
    path.mkdir()
    (path / "pyvenv.cfg").write_text(mark)
    return path


@pytest.mark.parametrize("name", ["env[1]", "e*", "e?v", "[!x]nv1"])
def test_leftovers_are_matched_by_exact_name_beside_a_concurrent_neighbour(tmp_path: Path, name: str) -> None:
    # The neighbour env1 is mid-install: it holds its lock, stages, and has its old env parked.
    neighbour = Layout(prefix=tmp_path / "env1")
    theirs = [_venv(neighbour.staging(os.getpid() + 1), "n"), _venv(neighbour.backup(os.getpid() + 1), "n")]
    fd = os.open(neighbour.lock, os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX)
    layout = Layout(prefix=tmp_path / name)
    ours_staging = _venv(layout.staging(DEAD), "ours")
    ours_parked = _venv(layout.backup(DEAD), "old")
    near_miss = _venv(tmp_path / f".{name}.staging-{DEAD}x", "not a leftover")
    said: list[str] = []
    try:
        assert layout.leftovers() == ([ours_staging], [ours_parked])
        with install_lock(layout, wait_s=0, say=said.append):
            clean_leftovers(layout, said.append)
    finally:
        os.close(fd)
    assert all(p.is_dir() for p in theirs), "a neighbour's staging or parked env was touched"
    assert not ours_staging.exists()
    assert (layout.prefix / "pyvenv.cfg").read_text() == "old"  # its own parked env put back
    assert near_miss.is_dir()
    assert len(said) == 2
