"""A wheelhouse's files are readable by the other nodes of a cluster: its pages, wheels and
manifests land 0644 (mkstemp makes them 0600), whatever the builder's umask."""

from __future__ import annotations

import stat
import zipfile
from pathlib import Path

from verl_setup.util.wheelhouse import PUBLISHED_MODE, _atomic_copy, _atomic_write, add_build_record


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_pages_copies_and_rewritten_wheels_are_readable_by_all(tmp_path: Path) -> None:
    page = tmp_path / "index.html"
    _atomic_write(page, "<html></html>\n")
    wheel = tmp_path / "demo-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        z.writestr("demo/__init__.py", "")
        z.writestr("demo-1.0.dist-info/METADATA", "Name: demo\nVersion: 1.0\n")
        z.writestr("demo-1.0.dist-info/RECORD", "demo/__init__.py,,\ndemo-1.0.dist-info/RECORD,,\n")
    copy = tmp_path / "copy" / wheel.name
    copy.parent.mkdir()
    _atomic_copy(wheel, copy)
    add_build_record(copy, {"torch": "2.11.0"})
    assert [_mode(p) for p in (page, copy)] == [PUBLISHED_MODE, PUBLISHED_MODE] == [0o644, 0o644]
    with zipfile.ZipFile(copy) as z:
        assert "demo-1.0.dist-info/verl_setup_build.json" in z.namelist()
    assert not [p.name for p in tmp_path.rglob(".*")]  # no temporary file left behind
