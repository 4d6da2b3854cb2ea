"""The parsed-matrix cache: keyed by the files' bytes, kept in the user's cache folder (so a
read-only install caches too), and never a reason to fail."""

from __future__ import annotations

import shutil
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from verl_setup.matrix import load
from verl_setup.matrix.load import default_matrix_path, load_matrix


@pytest.fixture
def parses(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Path]]:
    """Every real parse of a rows file, in order; the in-process caches cleared around the test."""
    seen: list[Path] = []
    real = load.check

    def counting(path: Path) -> tuple[list[str], load.Matrix | None]:
        seen.append(path)
        return real(path)

    monkeypatch.setattr(load, "check", counting)
    load._load.cache_clear()
    yield seen
    load._load.cache_clear()


def fresh(path: Path) -> load.Matrix:
    load._load.cache_clear()  # what a new process starts with
    return load_matrix(path)


@pytest.fixture
def read_only_install(tmp_path: Path) -> Path:
    """The bundled matrices copied into a folder nobody may write (as site-packages owned by root)."""
    folder = tmp_path / "site-packages" / "matrices"
    shutil.copytree(default_matrix_path().parent, folder)
    for path in [*folder.iterdir(), folder]:
        path.chmod(stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH | (stat.S_IXUSR if path.is_dir() else 0))
    return folder / "verl.yaml"


def test_a_second_process_reads_the_cache_and_an_edit_is_parsed_again(
    tmp_path: Path, parses: list[Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VERL_SETUP_CACHE_DIR", str(tmp_path / "cache"))
    rows = tmp_path / "m" / "verl.yaml"
    shutil.copytree(default_matrix_path().parent, rows.parent)
    first = fresh(rows)
    second = fresh(rows)
    assert parses == [rows]  # parsed once
    assert second == first
    assert second.rows[0].id == first.rows[0].id
    edited = rows.read_text().replace("id: cpu\n", "id: cpu-edited\n", 1)
    assert edited != rows.read_text()
    rows.write_text(edited)
    third = fresh(rows)
    assert parses == [rows, rows]  # the bytes changed: parsed again, the edit seen
    assert any(r.id == "cpu-edited" for r in third.rows)
    assert third.sha256 != first.sha256


def test_a_read_only_install_caches_in_the_users_folder(
    read_only_install: Path, tmp_path: Path, parses: list[Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VERL_SETUP_CACHE_DIR", str(tmp_path / "cache"))
    before = sorted(p.name for p in read_only_install.parent.iterdir())
    fresh(read_only_install)
    fresh(read_only_install)
    assert parses == [read_only_install]
    assert sorted(p.name for p in read_only_install.parent.iterdir()) == before  # nothing written there
    assert list((tmp_path / "cache" / "parsed").glob("matrix-*.pickle"))


def test_no_writable_cache_folder_only_means_parsing_every_time(
    tmp_path: Path, parses: list[Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv("VERL_SETUP_CACHE_DIR", str(blocker / "cache"))  # cannot be made, even by root
    assert fresh(default_matrix_path()) == fresh(default_matrix_path())
    assert len(parses) == 2


@pytest.mark.parametrize("spoil", ["torn", "group-writable"])
def test_a_torn_or_foreign_entry_is_not_trusted(
    spoil: str, tmp_path: Path, parses: list[Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VERL_SETUP_CACHE_DIR", str(tmp_path / "cache"))
    expected = fresh(default_matrix_path())
    (entry,) = (tmp_path / "cache" / "parsed").glob("matrix-*.pickle")
    if spoil == "torn":
        entry.write_bytes(entry.read_bytes()[:100])
    else:
        entry.chmod(0o666)  # another user could have put anything there: unpickling it would run it
    assert fresh(default_matrix_path()) == expected
    assert len(parses) == 2
