"""The interpreter answers kept per binary (host/interpreter_cache.py): reused only while it is the
same file loading the same libpython under the same loader variables; never for a launcher
script; a cache that cannot be used only means asking again."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from verl_setup.host import pythons
from verl_setup.host.interpreter import NoAnswer
from verl_setup.host.interpreter_cache import FILE, InterpreterCache

ANSWER = {"version": "3.12.1", "implementation": "cpython", "version_flag": "3.12.1", "libpython": None}


def _binary(path: Path, tail: bytes = b"") -> Path:
    path.write_bytes(b"\x7fELF" + b"\0" * 60 + tail)  # the cache reads only the magic; never run here
    path.chmod(0o755)
    return path


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {"VERL_SETUP_CACHE_DIR": str(tmp_path / "cache"), **extra}


def test_an_answer_is_kept_for_the_same_binary_and_read_back_by_the_next_run(tmp_path: Path) -> None:
    exe = _binary(tmp_path / "python3")
    cache = InterpreterCache(_env(tmp_path))
    assert cache.get(exe) is None
    cache.put(exe, ANSWER)
    cache.save()
    assert InterpreterCache(_env(tmp_path)).get(exe) == ANSWER
    assert (tmp_path / "cache" / FILE).stat().st_mode & 0o077 == 0  # mkstemp: this user's only


def test_a_changed_binary_or_loader_variable_or_libpython_is_asked_again(tmp_path: Path) -> None:
    exe, lib = _binary(tmp_path / "python3"), _binary(tmp_path / "libpython3.12.so.1.0")
    cache = InterpreterCache(_env(tmp_path))
    cache.put(exe, {**ANSWER, "libpython": str(lib)})
    cache.save()
    assert InterpreterCache(_env(tmp_path)).get(exe) is not None
    assert InterpreterCache(_env(tmp_path, LD_LIBRARY_PATH="/opt/other/lib")).get(exe) is None
    assert InterpreterCache(_env(tmp_path, PYTHONHOME="/opt/other")).get(exe) is None
    _binary(lib, b"upgraded")  # the same path, another library
    assert InterpreterCache(_env(tmp_path)).get(exe) is None
    cache.put(exe, {**ANSWER, "libpython": str(lib)})
    cache.save()
    _binary(exe, b"rebuilt")
    assert InterpreterCache(_env(tmp_path)).get(exe) is None


def test_a_symlink_moved_to_another_binary_is_asked_again(tmp_path: Path) -> None:
    old, new = _binary(tmp_path / "python3.11"), _binary(tmp_path / "python3.12")
    link = tmp_path / "python3"
    link.symlink_to(old)
    cache = InterpreterCache(_env(tmp_path))
    cache.put(link, ANSWER)
    cache.save()
    link.unlink()
    link.symlink_to(new)
    assert InterpreterCache(_env(tmp_path)).get(link) is None


def test_a_launcher_script_is_never_kept(tmp_path: Path) -> None:
    script = tmp_path / "python3"
    script.write_text('#!/bin/sh\nexec python3.12 "$@"\n')  # runs whatever python3.12 PATH finds
    cache = InterpreterCache(_env(tmp_path))
    cache.put(script, ANSWER)
    assert cache.get(script) is None
    cache.save()
    assert not (tmp_path / "cache" / FILE).exists()


@pytest.mark.parametrize("damage", ["torn", "foreign", "schema"])
def test_a_torn_foreign_or_old_cache_file_is_ignored(tmp_path: Path, damage: str) -> None:
    exe = _binary(tmp_path / "python3")
    cache = InterpreterCache(_env(tmp_path))
    cache.put(exe, ANSWER)
    cache.save()
    path = tmp_path / "cache" / FILE
    if damage == "torn":
        path.write_text(path.read_text()[:40])
    elif damage == "foreign":
        path.chmod(0o666)  # anyone could have written these facts
    else:
        path.write_text(json.dumps({**json.loads(path.read_text()), "schema": 0}))
    assert InterpreterCache(_env(tmp_path)).get(exe) is None


def test_an_unusable_cache_path_is_no_error(tmp_path: Path) -> None:
    exe = _binary(tmp_path / "python3")
    (tmp_path / "file").write_text("not a folder")
    cache = InterpreterCache({"VERL_SETUP_CACHE_DIR": str(tmp_path / "file" / "cache")})
    cache.put(exe, ANSWER)
    cache.save()  # mkdir below a file fails: nothing raised
    assert cache.get(exe) == ANSWER  # this run still has it


def test_a_kept_answer_asks_nothing_and_still_names_a_mismatch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    exe = _binary(tmp_path / "python3")
    cache = InterpreterCache(_env(tmp_path))
    cache.put(exe, {**ANSWER, "version_flag": "3.12.3"})

    def no_asking(*_: object, **__: object) -> None:
        raise NoAnswer("asked")

    monkeypatch.setattr(pythons, "ask", no_asking)
    found = pythons.interrogate(exe, "PATH", cache)
    assert found is not None
    assert (found.version, found.version_flag, found.source) == ("3.12.1", "3.12.3", "PATH")
    assert found.mismatch is not None
    assert "says 3.12.3 but the running libpython is 3.12.1" in found.mismatch
    assert pythons.interrogate(_binary(tmp_path / "python3.13"), "PATH", cache) is None  # not kept: asked


@pytest.mark.subprocess
def test_this_interpreter_is_answered_the_same_from_the_cache(tmp_path: Path) -> None:
    exe = Path(sys.executable)
    cache = InterpreterCache(_env(tmp_path))
    asked = pythons.interrogate(exe, "PATH", cache)
    cache.save()
    kept = pythons.interrogate(exe, "PATH", InterpreterCache(_env(tmp_path)))
    assert asked is not None
    assert asked == kept
    assert InterpreterCache(_env(tmp_path)).get(exe) is not None  # the real binary behind the venv's link
