"""uv outside the tested range is refused in one line naming the range needed, not discovered later
as a misleading resolution failure (uv 0.5.31: "row cpu does not resolve ... unexpected argument
'--format'")."""

from __future__ import annotations

import re
import stat
from pathlib import Path

import pytest

from verl_setup.errors import InstallError
from verl_setup.util import uvbin

ROOT = Path(__file__).parents[2]
# `uv --version` as uv 0.5.31 from the package index prints it (run 2026-12-07 in a scratch venv).
OLD_UV_VERSION = "uv 0.5.31\n"


def test_the_declared_dependency_is_the_tested_range() -> None:
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    major, minor = uvbin.TESTED_UV
    assert f'"uv>={major}.{minor},<{major}.{minor + 1}"' in text


@pytest.mark.parametrize("version", ["0.5.31", "0.12.4", "0.14.0", "1.0.0"])
def test_a_uv_outside_the_range_is_one_line_naming_the_range(version: str) -> None:
    with pytest.raises(InstallError) as caught:
        uvbin.check_version("/usr/bin/uv", version)
    message = str(caught.value)
    assert "\n" not in message
    assert f"/usr/bin/uv is uv {version}; verl-setup needs uv 0.13.x" in message
    assert caught.value.exit_code == 4


def test_the_bundled_uv_is_in_range_and_found_without_running_it() -> None:
    found = uvbin.find_uv()  # the unit tests' tripwire fails it if it started a program
    assert Path(found).name == "uv"


@pytest.mark.subprocess
def test_the_quick_lookup_finds_what_uv_finds_and_knows_its_version() -> None:
    """find_uv's look in this venv's bin/ (no `uv` import) is uv's own find_uv_bin answer, and the
    version it records for the manifest is what that binary prints."""
    import subprocess  # noqa: PLC0415
    import sys  # noqa: PLC0415

    from uv import find_uv_bin  # noqa: PLC0415

    from verl_setup.environment.uv import uv_version  # noqa: PLC0415

    if sys.prefix == sys.base_prefix:
        pytest.skip("the tests run outside a venv: there is no venv bin/ to look in")
    assert uvbin._in_this_venv() == str(find_uv_bin())
    found = uvbin.find_uv()
    printed = subprocess.run([found, "--version"], capture_output=True, text=True, check=True).stdout
    assert printed.split()[1] == uvbin.known_version(found) == uv_version(found)


@pytest.mark.subprocess
def test_an_old_uv_on_path_is_refused_when_the_bundled_one_is_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import uv  # noqa: PLC0415

    def missing() -> str:
        raise FileNotFoundError("no bundled uv")

    fake = tmp_path / "uv"
    fake.write_text(f"#!/bin/sh\nprintf '{OLD_UV_VERSION.strip()}\\n'\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setattr(uv, "find_uv_bin", missing)
    monkeypatch.setattr(uvbin, "_in_this_venv", lambda: None)
    monkeypatch.setenv("PATH", str(tmp_path))
    uvbin.path_version.cache_clear()
    with pytest.raises(InstallError, match=re.escape(f"{fake} is uv 0.5.31; verl-setup needs uv 0.13.x")):
        uvbin.find_uv()


def test_docker_build_without_the_docker_extra_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    from verl_setup.image import engine  # noqa: PLC0415

    monkeypatch.setitem(__import__("sys").modules, "docker", None)  # `import docker` raises ImportError
    with pytest.raises(InstallError, match=re.escape("install verl-setup[docker]")):
        engine.client()
