"""The one interpreter probe (host/interpreter.py) on real interpreters: this one, and pyenv's old
ones, which must still answer (an old `python` on PATH is listed by detect, not dropped)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from verl_setup.host.interpreter import NoAnswer, ask, shim_folder

PYENV = Path.home() / ".pyenv" / "versions"


@pytest.mark.subprocess
def test_this_interpreter_describes_itself_and_lists_what_it_has() -> None:
    answer = ask(
        Path(sys.executable), timeout=30, parts=("paths", "markers"), distributions=("packaging", "pyyaml"),
        requires=("packaging",),
    )  # fmt: skip
    assert answer.version == ".".join(map(str, sys.version_info[:3]))
    assert answer.version_flag == answer.version
    assert answer.mismatch is None
    assert answer.prefix == sys.prefix
    assert answer.purelib is not None
    assert answer.markers["python_full_version"] == answer.version
    names = {d.name.lower(): d for d in answer.distributions}
    assert set(names) == {"packaging", "pyyaml"}  # only what was asked for
    assert names["packaging"].requires is not None
    assert names["pyyaml"].requires is None  # Requires-Dist only where asked


@pytest.mark.subprocess
@pytest.mark.parametrize("version", ["2.7.18", "3.6.15"])
def test_an_old_interpreter_still_answers_without_distributions(version: str) -> None:
    exe = PYENV / version / "bin" / "python"
    if not exe.exists():
        pytest.skip(f"no pyenv Python {version} here")
    answer = ask(exe, timeout=30, parts=("paths", "markers"), distributions="*")
    assert answer.version == version
    assert answer.distributions == ()  # no importlib.metadata before 3.8: none listed, no crash
    assert answer.libpython is None or "libpython" in answer.libpython


@pytest.mark.subprocess
def test_a_launcher_whose_version_flag_lies_is_a_mismatch_naming_both(tmp_path: Path) -> None:
    launcher = tmp_path / "python3"
    launcher.write_text(
        f'#!/bin/sh\n[ "$1" = --version ] && {{ echo "Python 3.9.0"; exit 0; }}\nexec {sys.executable} "$@"\n'
    )
    launcher.chmod(0o755)
    answer = ask(launcher, timeout=30)
    assert answer.prefix is None  # the bare questions run without site: no prefix claimed
    assert answer.version_flag == "3.9.0"
    assert answer.mismatch is not None
    assert answer.mismatch.startswith(
        f"`python3 --version` says 3.9.0 but the running libpython is {answer.version}"
    )


@pytest.mark.subprocess
def test_a_program_that_is_no_python_is_no_answer(tmp_path: Path) -> None:
    fake = tmp_path / "python3"
    fake.write_text("#!/bin/sh\necho not json\n")
    fake.chmod(0o755)
    with pytest.raises(NoAnswer, match="gave no readable answer"):
        ask(fake, timeout=30)
    with pytest.raises(NoAnswer, match="cannot run"):
        ask(tmp_path / "missing", timeout=30)


def test_pyenv_shim_folders_are_recognised() -> None:
    assert shim_folder("/root/.pyenv/shims")
    assert shim_folder("/root/.pyenv/shims/")
    assert not shim_folder("/usr/bin")


@pytest.mark.subprocess
def test_the_quick_listing_reads_what_importlib_metadata_reads(tmp_path: Path) -> None:
    """The header-only reader (scripts/interpreter.py) against importlib.metadata on a folder with
    every shape it reads: dist-info, egg-info folder and file, folded and odd headers, a body with
    its own `Name:`, a dotted name grouped beside its underscored twin, one without a Name."""
    site = tmp_path / "site"
    infos = {
        "zeta_pkg-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: zeta-pkg\nVersion: 1.0\n",
        "Alpha.Beta-2.0.dist-info/METADATA": "Metadata-Version: 2.1\nname:   Alpha.Beta  \nVERSION: 2.0\n",
        "alpha_beta-3.0.dist-info/METADATA": "Name: alpha_beta\nSummary: a\n  folded line\nVersion: 3.0\n",
        "old-0.1.egg-info/PKG-INFO": "Metadata-Version: 1.0\nName: old\nVersion: 0.1\n",
        "nameless-1.dist-info/METADATA": "Metadata-Version: 2.1\nVersion: 1\n",
        "body-1.dist-info/METADATA": "Name: body\nVersion: 1\n\nName: not-this\nVersion: 9\n",
    }
    for rel, text in infos.items():
        (site / rel).parent.mkdir(parents=True, exist_ok=True)
        (site / rel).write_text(text)
    (site / "flat-4.egg-info").write_text("Metadata-Version: 1.0\nName: flat\nVersion: 4\n")
    script = Path(__file__).parents[2] / "installer" / "verl_setup" / "scripts" / "interpreter.py"
    code = (
        f"import sys, runpy; m = runpy.run_path({str(script)!r}); sys.path.insert(0, {str(site)!r})\n"
        "quick, slow = m['_quick_distributions'](), m['_metadata_distributions']()\n"
        "print(repr(([r[:3] for r in quick], [r[:3] for r in slow])))"
    )
    import ast  # noqa: PLC0415
    import subprocess  # noqa: PLC0415

    out = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True, check=True)
    quick, slow = ast.literal_eval(out.stdout)
    assert quick == slow
    assert {(n, v) for n, v, _ in quick} == {
        ("zeta-pkg", "1.0"), ("Alpha.Beta  ", "2.0"), ("alpha_beta", "3.0"), ("old", "0.1"),
        (None, "1"), ("body", "1"), ("flat", "4"),
    }  # fmt: skip
