"""`verl-setup lock` with real uv: deterministic, hashed, installed exactly, tampering refused."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pytest

from tests.integration.test_install import TINY_MATRIX, cli, install, installed_row, leftovers, tiny_env
from verl_setup.environment.lock import read_lock

pytestmark = [pytest.mark.network, pytest.mark.slow]


def lock(out: Path, *flags: str, matrix: Path | None = TINY_MATRIX) -> str:
    """Write a lock and return its text."""
    argv = ["lock", "--out", str(out), *flags] + (["--matrix", str(matrix)] if matrix else [])
    result = cli(*argv, timeout=900)
    assert result.returncode == 0, result.stderr
    return out.read_text()


def test_lock_is_deterministic_and_names_row_matrix_and_uv(tmp_path: Path) -> None:
    first = lock(tmp_path / "a.lock", "--verl", "0.0.1")
    second = lock(tmp_path / "b.lock", "--verl", "0.0.1")
    assert first == second
    parsed = read_lock(tmp_path / "a.lock")
    assert parsed.fields["row"] == "tiny-old"
    assert parsed.fields["matrix"] == "verl.yaml"
    assert parsed.fields["matrix-sha256"] == hashlib.sha256(TINY_MATRIX.read_bytes()).hexdigest()
    assert re.fullmatch(r"\d+\.\d+\.\d+", parsed.fields["uv"])
    assert parsed.fields["platform"] == "x86_64-manylinux_2_17"  # the row's own glibc floor, binary-only
    assert {(p.name, p.version) for p in parsed.pins} == {
        ("verl", "0.0.1+tiny"),
        ("torch", "0.0.1+tiny"),
        ("six", "1.16.0"),
        ("idna", "3.7"),
    }
    assert all(line.count("--hash=sha256:") <= 1 for line in first.splitlines())
    assert "# via -r requirements.in" in first  # the same on every machine: no temp paths


def test_install_lock_installs_exactly_the_lock(tmp_path: Path) -> None:
    lock_file = tmp_path / "verl.lock"
    lock(lock_file, "--verl", "0.0.1")
    prefix = tmp_path / "env"
    # This machine's plan would pick tiny-new; the lock decides what gets installed.
    result = install(prefix, "--lock", str(lock_file))
    assert result.returncode == 0, result.stderr
    assert "the lock is for row tiny-old" in result.stderr
    assert installed_row(prefix) == "tiny-old"
    verified = cli("verify", "--prefix", str(prefix), "--lock", str(lock_file), "--no-import")
    assert verified.returncode == 0, verified.stdout
    assert "4 of 4 expected distributions match" in verified.stdout


def tamper(text: str, package: str) -> str:
    """Flip the last hex digit of `package`'s first hash."""
    m = re.search(rf"^{re.escape(package)}==\S+ \\\n    --hash=sha256:([0-9a-f]{{64}})", text, re.M)
    assert m is not None
    digest = m[1]
    return text.replace(digest, digest[:-1] + ("0" if digest[-1] != "0" else "1"))


def test_a_lock_with_one_altered_hash_is_refused_and_the_old_env_kept(tmp_path: Path) -> None:
    good = tmp_path / "verl.lock"
    text = lock(good, "--verl", "0.0.1")
    prefix = tmp_path / "project" / "env"
    assert install(prefix).returncode == 0  # tiny-new, the env a bad lock must not harm

    edited = tmp_path / "edited.lock"
    edited.write_text(tamper(text, "torch"))
    result = install(prefix, "--lock", str(edited))
    assert result.returncode == 4
    assert result.stderr.splitlines()[-1] == (
        f"verl-setup: error: {edited} was changed after `verl-setup lock` wrote it (its header or body no "
        "longer matches sha256); regenerate it rather than editing it"
    )
    # A header line changes what is installed and recorded: the row, the Python, the index.
    for old, new in (
        (r"^# row: tiny-old$", "# row: tiny-new"),
        (r"^# python: .*$", "# python: 3.10.13"),
        (r"^# index-url: default$", "# index-url: http://127.0.0.1:1/simple"),
    ):
        edited_header = tmp_path / "header.lock"
        edited_header.write_text(re.sub(old, new, text, count=1, flags=re.M))
        assert edited_header.read_text() != text, old
        result = install(prefix, "--lock", str(edited_header))
        assert result.returncode == 4, (old, result.stderr)
        assert "its header or body no longer matches sha256" in result.stderr.splitlines()[-1]
        assert "staging" not in result.stderr
        assert installed_row(prefix) == "tiny-new"
        assert leftovers(prefix) == []

    # Someone who also fixes up the seal meets uv's own hash check.
    forged = tmp_path / "forged.lock"
    header, body = tamper(text, "torch").split("# sha256: ")
    body = body.split("\n", 1)[1]
    forged.write_text(f"{header}# sha256: {hashlib.sha256((header + body).encode()).hexdigest()}\n{body}")
    result = install(prefix, "--lock", str(forged))
    assert result.returncode == 4
    last = result.stderr.splitlines()[-1]
    assert last.startswith("verl-setup: error: uv refused the lock: ")
    assert "Hash mismatch for `torch==0.0.1+tiny`" in last
    assert installed_row(prefix) == "tiny-new"
    assert leftovers(prefix) == []


def test_the_cpu_row_locks_identically_twice_and_the_users_torch_backend_does_not_reach_uv(
    tmp_path: Path,
) -> None:
    first = lock(tmp_path / "a.lock", "--no-gpu", matrix=None)
    # vLLM's docs tell users to export UV_TORCH_BACKEND=auto; uv then sends torch to PyTorch's own
    # index (unreachable here: the lock failed; elsewhere `torch==2.11.0` became 2.11.0+cpu).
    result = cli(
        "lock",
        "--out",
        str(tmp_path / "b.lock"),
        "--no-gpu",
        env=tiny_env(UV_TORCH_BACKEND="cpu"),
        timeout=900,
    )
    assert result.returncode == 0, result.stderr
    assert (
        "warning: not passed to uv, since the row decides what it resolves: UV_TORCH_BACKEND" in result.stderr
    )
    second = (tmp_path / "b.lock").read_text()
    assert first == second
    parsed = read_lock(tmp_path / "a.lock")
    assert parsed.row_id == "cpu"
    assert parsed.python == "3.12.3"
    pins = {p.name: p.version for p in parsed.pins}
    assert pins["verl"] == "0.9.1"
    assert pins["torch"] == "2.11.0"
    assert len(pins) > 50


def test_a_pylock_installs_with_install_lock_and_an_edited_one_changes_nothing(tmp_path: Path) -> None:
    pylock = tmp_path / "pylock.tiny-old.toml"
    # PEP 751 enforces the lock's Python: its minor, every patch (issue 32), so any 3.11 here.
    text = lock(pylock, "--verl", "0.0.1", "--python", "3.11.7", "--format", "pylock")
    assert text.startswith("# verl-setup lock (PEP 751) of row tiny-old for Python 3.11 on ")
    assert '\nlock-version = "1.0"\n' in text
    assert '\nrequires-python = ">=3.11,<3.12"\n' in text
    assert '\n[tool.verl-setup]\nformat = 1\nrow = "tiny-old"\n' in text
    prefix = tmp_path / "project" / "env"
    result = install(prefix, "--lock", str(pylock))
    assert result.returncode == 0, result.stderr
    assert installed_row(prefix) == "tiny-old"
    verified = cli("verify", "--prefix", str(prefix), "--lock", str(pylock), "--no-import")
    assert verified.returncode == 0, verified.stdout
    assert "4 of 4 expected distributions match" in verified.stdout

    edited = tmp_path / "pylock.edited.toml"
    edited.write_text(text.replace('row = "tiny-old"', 'row = "tiny-new"', 1))
    refused = install(prefix, "--lock", str(edited))
    assert refused.returncode == 4
    assert "was changed after `verl-setup lock` wrote it" in refused.stderr.splitlines()[-1]
    assert installed_row(prefix) == "tiny-old"
    assert leftovers(prefix) == []

    named = cli(
        "lock", "--matrix", str(TINY_MATRIX), "--format", "pylock", "--out", str(tmp_path / "tiny.toml")
    )
    assert named.returncode == 2
    assert named.stderr.splitlines()[-1].endswith("try --out pylock.tiny-new.toml")
    assert not (tmp_path / "tiny.toml").exists()
