"""issue 32, item 3: install ends with what to type next (the env uv makes has no pip, so after
`activate` a bare `pip install` goes into another Python: the lines say how to add a package)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.test_install import install

pytestmark = [pytest.mark.network, pytest.mark.slow]


def test_install_ends_with_activate_add_a_package_run_and_doctor(tmp_path: Path) -> None:
    prefix = tmp_path / "env"
    result = install(prefix, "--no-import")
    assert result.returncode == 0, result.stderr
    lines = result.stderr.splitlines()
    tail = lines[lines.index("next:") :]
    assert lines[lines.index("next:") - 1].endswith(f"done: row tiny-new installed in {prefix}")
    assert f"  activate      source {prefix}/bin/activate" in tail
    assert any(
        f"--prefix {prefix} --with PKG" in x and f"uv pip install --python {prefix}/bin/python PKG" in x
        for x in tail
    )
    assert any("this env has no pip" in x for x in tail)
    assert any("verl's quick start" in x for x in tail)
    assert any(x.startswith("  check         verl-setup doctor") for x in tail)
    assert not (prefix / "bin" / "pip").exists()  # what the line warns about


def test_quiet_install_prints_no_next_steps(tmp_path: Path) -> None:
    result = install(tmp_path / "env", "--no-import", "-q")
    assert result.returncode == 0, result.stderr
    assert "next:" not in result.stderr
