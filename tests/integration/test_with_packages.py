"""The user's packages with real uv, on the tiny matrix: added on top of the row without moving
it, refused before anything changes, hashed in a lock, a git verl locked at its commit (a local
git repository served by file://, as GitHub is unreachable here), a verl checkout editable."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.integration.test_install import TINY_MATRIX, cli, copy_env, install, leftovers, old_env
from verl_setup.environment.lock import read_lock
from verl_setup.util.uvbin import find_uv

pytestmark = [pytest.mark.network, pytest.mark.slow]
__all__ = ["old_env"]  # the fixture, shared with test_install


def fake_verl(root: Path, version: str = "0.0.1") -> Path:
    """A verl project laid out as verl's checkout is (its version in verl/version/version), in git."""
    (root / "verl" / "version").mkdir(parents=True)
    (root / "verl" / "version" / "version").write_text(version + "\n")
    (root / "verl" / "__init__.py").write_text("FORK = True\n")
    (root / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools>=61"]\nbuild-backend = "setuptools.build_meta"\n'
        f'[project]\nname = "verl"\nversion = "{version}+fork"\ndependencies = ["six"]\n'
        '[tool.setuptools.packages.find]\ninclude = ["verl*"]\n'
        '[tool.setuptools.package-data]\nverl = ["version/*"]\n'
    )
    git = ["git", "-C", str(root), "-c", "user.email=t@t", "-c", "user.name=t"]
    subprocess.run(["git", "init", "-q", "-b", "main", str(root)], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "fork"], check=True)
    return root


def head(repo: Path) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()


def python(prefix: Path, code: str) -> str:
    out = subprocess.run(
        [str(prefix / "bin" / "python"), "-c", code], capture_output=True, text=True, check=False
    )
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_with_adds_packages_and_the_rows_pins_stay(tmp_path: Path) -> None:
    req = tmp_path / "reqs.txt"
    req.write_text("# ours\nword2number==1.1\n")
    prefix = tmp_path / "env"
    result = install(prefix, "--verl", "0.0.1", "--with", "tabulate", "--with-requirements", str(req))
    assert result.returncode == 0, result.stderr
    assert "with: resolved with row tiny-old's pins held: tabulate" in result.stderr
    assert python(
        prefix, "import tabulate, word2number, torch, six; print(torch.__version__, six.__version__)"
    ) == ("0.0.1+tiny 1.16.0")
    record = json.loads((prefix / "verl-setup.json").read_text())
    assert [(w["name"], w["origin"]) for w in record["with"]] == [
        ("tabulate", "--with"),
        ("word2number", f"--with-requirements {req} (line 2)"),
    ]
    verified = cli("verify", "--prefix", str(prefix), "--no-import")
    assert verified.returncode == 0, verified.stdout
    # A package of theirs removed afterwards: verify fails (exit 5) and names it as theirs.
    uv = find_uv()
    subprocess.run(
        [uv, "pip", "uninstall", "--python", str(prefix / "bin" / "python"), "tabulate"], check=True
    )
    broken = cli("verify", "--prefix", str(prefix), "--no-import")
    assert broken.returncode == 5
    assert "missing    tabulate" in broken.stdout
    assert "your package (--with)" in broken.stdout


def test_a_conflict_is_refused_and_the_existing_env_is_untouched(old_env: Path, tmp_path: Path) -> None:
    prefix = copy_env(old_env, tmp_path / "kept" / "env")
    before = (prefix / "verl-setup.json").read_bytes()
    result = install(prefix, "--verl", "0.0.1", "--with", "six<1.16")
    assert result.returncode == 4
    (line,) = [ln for ln in result.stderr.splitlines() if ln.startswith("verl-setup: error")]
    assert (
        "six<1.16 (--with) conflicts with row tiny-old's pin six==1.16.0 (evidence: PyPI: pure-Python wheel)"
        in line
    )
    assert (prefix / "verl-setup.json").read_bytes() == before
    assert leftovers(prefix) == []
    assert cli("verify", "--prefix", str(prefix), "--no-import").returncode == 0


def test_lock_with_pins_the_package_with_a_hash(tmp_path: Path) -> None:
    out = tmp_path / "with.lock"
    result = cli(
        "lock", "--matrix", str(TINY_MATRIX), "--verl", "0.0.1", "--with", "tabulate", "--out", str(out)
    )
    assert result.returncode == 0, result.stderr
    text = out.read_text()
    lock = read_lock(out)
    assert lock.fields["with"] == "tabulate"
    assert "tabulate" in {p.name for p in lock.pins}
    after = text.split("\ntabulate==", 1)[1].splitlines()
    assert after[1].strip().startswith("--hash=sha256:")


def test_a_git_verl_locks_at_its_full_commit_and_installs_from_it(tmp_path: Path) -> None:
    repo = fake_verl(tmp_path / "fork")
    out = tmp_path / "git.lock"
    result = cli(
        "lock", "--matrix", str(TINY_MATRIX), "--verl", "0.0.1",
        "--with", f"verl @ git+file://{repo}@main", "--out", str(out),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    lock = read_lock(out)
    assert lock.fields["git"] == f"uv pip install --no-deps 'verl @ git+file://{repo}@{head(repo)}'"
    assert "git+" not in out.read_text().split("# sha256:", 1)[1]  # the hashed body stays hashed
    prefix = tmp_path / "env"
    installed = install(prefix, "--lock", str(out), "--no-import")
    assert installed.returncode == 0, installed.stderr
    assert python(prefix, "import verl; print(verl.FORK)") == "True"
    record = json.loads((prefix / "verl-setup.json").read_text())
    assert record["with"] == [{"name": "verl", "origin": "lock git.lock", "installed": "0.0.1+fork"}]


def test_a_verl_checkout_is_editable_and_a_new_module_imports_without_reinstall(tmp_path: Path) -> None:
    checkout = fake_verl(tmp_path / "verl")
    prefix = tmp_path / "env"
    result = install(prefix, "--with-editable", str(checkout), "--no-import")
    assert result.returncode == 0, result.stderr
    assert "your verl from" in result.stderr
    assert python(prefix, "import verl; print(verl.__file__)") == str(checkout / "verl" / "__init__.py")
    (checkout / "verl" / "added.py").write_text("HERE = 1\n")
    assert python(prefix, "import verl.added; print(verl.added.HERE)") == "1"
    verified = cli("verify", "--prefix", str(prefix), "--no-import")
    assert verified.returncode == 0, verified.stdout
    (checkout / "verl" / "version" / "version").write_text("0.1.0\n")
    moved = cli("verify", "--prefix", str(prefix), "--no-import")
    assert "is now 0.1.0, outside the row's verl line" in moved.stdout


def test_keep_holds_the_sites_own_build_and_verify_reads_it(old_env: Path, tmp_path: Path) -> None:
    prefix = copy_env(old_env, tmp_path / "site" / "env")
    # The site's own build of a row package: here a newer idna than the row's 3.7.
    subprocess.run(
        [find_uv(), "pip", "install", "--python", str(prefix / "bin" / "python"), "idna==3.8"], check=True
    )
    result = install(prefix, "--verl", "0.0.1", "--keep", "idna")
    assert result.returncode == 0, result.stderr
    assert "idna 3.8 (--keep)" in result.stderr
    assert python(prefix, "import idna, six; print(idna.__version__, six.__version__)") == "3.8 1.16.0"
    assert json.loads((prefix / "verl-setup.json").read_text())["keep"] == {"idna": "3.8"}
    verified = cli("verify", "--prefix", str(prefix), "--no-import")
    assert verified.returncode == 0, verified.stdout
    assert "ABI check" in verified.stdout
    refused = cli("lock", "--matrix", str(TINY_MATRIX), "--keep", "idna")
    assert refused.returncode == 2
    assert "--keep idna keeps a package as the environment at the prefix has it" in refused.stderr


def test_a_bundle_carries_a_checkout_as_the_wheel_built_from_it(tmp_path: Path) -> None:
    checkout = fake_verl(tmp_path / "verl")
    bundle = tmp_path / "bundle"
    made = cli(
        "bundle", "--matrix", str(TINY_MATRIX), "--with-editable", str(checkout), "--with", "tabulate",
        "--no-python", "--out", str(bundle),
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    wheels = sorted(p.name for p in (bundle / "wheels").iterdir())
    assert any(w.startswith("verl-0.0.1+fork-") for w in wheels), wheels
    assert any(w.startswith("tabulate-") for w in wheels), wheels
    prefix = tmp_path / "env"
    installed = cli(
        "install",
        "--matrix",
        str(TINY_MATRIX),
        "--offline",
        str(bundle),
        "--prefix",
        str(prefix),
        "--no-import",
    )
    assert installed.returncode == 0, installed.stderr
    assert python(prefix, "import verl, tabulate; print(verl.FORK)") == "True"
