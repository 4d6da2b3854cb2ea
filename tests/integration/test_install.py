"""`verl-setup install` with real uv and the real index, on the tiny matrix: atomic, verified,
recoverable. Fault injection: SIGINT and SIGKILL at every step, a full disk, an unwritable
parent, concurrent installs. Each tiny install takes about a second.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import json_data
from verl_setup.environment.staging import Layout

pytestmark = [pytest.mark.network, pytest.mark.slow]

TINY = Path(__file__).resolve().parents[1] / "fixtures" / "tiny-matrix"
TINY_MATRIX = TINY / "verl.yaml"
TIMEOUT = 300


def _tiny_cache() -> str:
    """A uv cache for the tiny matrix alone, named by the stand-ins' bytes: uv caches a find-links
    wheel by its file name, so a rebuilt stand-in must not meet its old copy."""
    digest = hashlib.sha256()
    for path in sorted((TINY / "wheels").iterdir()):
        digest.update(path.name.encode() + path.read_bytes())
    return str(Path.home() / ".cache" / "verl-setup-tests" / f"uv-tiny-{digest.hexdigest()[:12]}")


def tiny_env(**more: str) -> dict[str, str]:
    """The environment for a verl-setup run on the tiny matrix (stand-in wheels via find-links)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("VERL_SETUP_")}
    return {
        **env,
        "UV_FIND_LINKS": str(TINY / "wheels"),
        "UV_PYTHON_DOWNLOADS": "never",
        "UV_CACHE_DIR": _tiny_cache(),
        **more,
    }


def cli(
    *argv: str, env: dict[str, str] | None = None, timeout: float = TIMEOUT
) -> subprocess.CompletedProcess[str]:
    """Run `verl-setup argv...` in a fresh process, as a user would."""
    return subprocess.run(
        [sys.executable, "-m", "verl_setup", *argv],
        capture_output=True,
        text=True,
        env=env or tiny_env(),
        timeout=timeout,
        check=False,
    )


def install(prefix: Path, *flags: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """A tiny-matrix install (row tiny-new unless the flags say otherwise)."""
    return cli("install", "--matrix", str(TINY_MATRIX), "--prefix", str(prefix), *flags, env=env)


def installed_row(prefix: Path) -> str:
    """The row id the env at `prefix` was installed from, after checking that it verifies."""
    result = cli("verify", "--prefix", str(prefix))
    assert result.returncode == 0, result.stdout + result.stderr
    return str(json.loads((prefix / "verl-setup.json").read_text())["row"]["id"])


def leftovers(prefix: Path) -> list[str]:
    """Anything beside the prefix except the prefix itself and its lock file."""
    keep = {prefix.name, Layout(prefix=prefix).lock.name}
    return sorted(p.name for p in prefix.parent.iterdir() if p.name not in keep)


@pytest.fixture(scope="module")
def old_env(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished tiny-old install, copied (cp -a) into each test that needs an existing env."""
    prefix = tmp_path_factory.mktemp("template") / "env"
    result = install(prefix, "--verl", "0.0.1")
    assert result.returncode == 0, result.stderr
    return prefix


def copy_env(template: Path, prefix: Path) -> Path:
    prefix.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["cp", "-a", str(template), str(prefix)], check=True)
    return prefix


def test_install_builds_a_verified_relocated_env_with_a_manifest(tmp_path: Path) -> None:
    prefix = tmp_path / "project" / ".venv"
    result = install(prefix, "--python", "3.12", "--json")
    assert result.returncode == 0, result.stderr
    steps = [line.split("] ", 1)[1].split(":")[0] for line in result.stderr.splitlines() if "] " in line]
    assert steps[:1] == ["plan"]
    assert [s for s in steps if s != "warning"][-6:] == [
        "venv",
        "verl",
        "verify",
        "manifest",
        "swap",
        "done",
    ]
    data = json_data(result.stdout)
    manifest = json.loads((prefix / "verl-setup.json").read_text())
    assert data["manifest"] == manifest
    assert manifest["row"]["id"] == "tiny-new"
    assert manifest["distributions"] == {
        "idna": "3.10",
        "six": "1.17.0",
        "torch": "0.0.2+tiny",
        "verl": "0.0.2+tiny",
    }
    assert manifest["matrix"]["sha256"]
    assert manifest["facts"]["engine"]["source"] == "not requested"
    assert data["import"]["ok"] is True
    # Built at .venv.staging-PID, then renamed: its scripts and interpreter work where it landed.
    assert "relocatable = true" in (prefix / "pyvenv.cfg").read_text()
    tool = subprocess.run([str(prefix / "bin" / "verl-tiny")], capture_output=True, text=True, check=True)
    assert tool.stdout.strip() == "verl 0.0.2+tiny with torch 0.0.2+tiny and six 1.17.0"
    assert leftovers(prefix) == []
    assert installed_row(prefix) == "tiny-new"


def test_dry_run_prints_the_exact_uv_commands_and_changes_nothing(tmp_path: Path) -> None:
    prefix = tmp_path / "env"
    result = install(prefix, "--dry-run")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    venv = next(line for line in lines if " venv " in line)
    pips = [line for line in lines if " pip install " in line]
    assert "--relocatable" in venv
    assert venv.split()[-1] == str(tmp_path / f".env.staging-{venv.split('-')[-1]}")
    assert len(pips) == 1  # the row in one resolve, torch in it (an image alone gives torch a layer first)
    assert pips[-1].split(" --only-binary ")[0].split(" --python ")[1].split()[1:] == [
        "verl==0.0.2+tiny",
        "torch==0.0.2+tiny",
        "six==1.17.0",
        "idna==3.10",
    ]
    assert any(line.startswith("# verl: verl 0.0.2+tiny, torch 0.0.2+tiny") for line in lines)
    assert list(tmp_path.iterdir()) == []


def test_install_replaces_an_existing_env_only_with_a_verified_one(old_env: Path, tmp_path: Path) -> None:
    prefix = copy_env(old_env, tmp_path / "project" / "env")
    assert install(prefix).returncode == 0
    assert installed_row(prefix) == "tiny-new"
    # A row whose override contradicts its pin installs the wrong six: verification stops it.
    bad = tmp_path / "elsewhere" / "verl.yaml"
    bad.parent.mkdir()
    bad.write_text(TINY_MATRIX.read_text().replace('- "six==1.16.0"', '- "six==1.17.0"'))
    result = cli("install", "--matrix", str(bad), "--prefix", str(prefix), "--verl", "0.0.1")
    assert result.returncode == 4
    assert "changed    six 1.16.0 -> 1.17.0" in result.stderr
    assert result.stderr.splitlines()[-1].startswith(
        "verl-setup: error: the new environment failed verification"
    )
    assert installed_row(prefix) == "tiny-new"
    assert leftovers(prefix) == []


def _with_sdist_only_pin(folder: Path, *, allowed: bool) -> Path:
    """The tiny matrix with row tiny-new also pinning docopt 0.6.2, which PyPI has only as an sdist
    (pure Python); `allowed` lists it under `sdists`, as the bundled matrix does antlr4."""
    text = TINY_MATRIX.read_text()
    start = text.index("  - id: tiny-new\n")
    at = text.index('      idna: "3.10"\n', start)
    text = text[:at] + '      docopt: "0.6.2"\n' + text[at:]
    at = text.index('      idna: "PyPI: pure-Python wheel, 70 KB"\n', start)
    text = text[:at] + '      docopt: "PyPI: docopt 0.6.2 is published only as an sdist"\n' + text[at:]
    if allowed:
        text = text.replace(
            "\nrows:\n",
            '\nsdists:\n  docopt:\n    versions: ["0.6.2"]\n    reason: "pure Python, sdist only"\n\nrows:\n',
            1,
        )
    folder.mkdir(parents=True)
    (folder / "verl.yaml").write_text(text)
    return folder / "verl.yaml"


def test_an_sdist_only_dependency_is_refused_in_one_line_and_nothing_changes(
    old_env: Path, tmp_path: Path
) -> None:
    prefix = copy_env(old_env, tmp_path / "project" / "env")
    matrix = _with_sdist_only_pin(tmp_path / "refused", allowed=False)
    result = cli("install", "--matrix", str(matrix), "--prefix", str(prefix), "--row", "tiny-new")
    assert result.returncode == 4, result.stderr
    errors = [ln for ln in result.stderr.splitlines() if ln.startswith("verl-setup: error:")]
    assert len(errors) == 1
    assert "docopt has no wheel for this Python and platform" in errors[0]
    assert "binary-only" in errors[0]
    assert installed_row(prefix) == "tiny-old"  # the existing environment is untouched
    assert leftovers(prefix) == []
    # Listed under `sdists`, the same package is built from its sdist on purpose.
    matrix = _with_sdist_only_pin(tmp_path / "allowed", allowed=True)
    result = cli("install", "--matrix", str(matrix), "--prefix", str(prefix), "--row", "tiny-new")
    assert result.returncode == 0, result.stderr
    assert installed_row(prefix) == "tiny-new"


def test_a_directory_that_is_not_a_venv_is_refused(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("mine")
    result = install(tmp_path)
    assert result.returncode == 2
    assert "refusing to replace" in result.stderr
    assert (tmp_path / "notes.txt").read_text() == "mine"


def test_no_interpreter_for_the_row_is_a_clear_error(tmp_path: Path) -> None:
    from verl_setup.host.pythons import detect_pythons  # noqa: PLC0415

    if any(
        p.version.startswith("3.14.")
        for p in detect_pythons(os.environ["PATH"], Path.home(), dict(os.environ))
    ):
        pytest.skip("this machine has a Python 3.14")
    result = install(tmp_path / "env", "--python", "3.14")
    assert result.returncode == 4
    assert "no Python 3.14 found" in result.stderr
    assert "downloads are off" in result.stderr
    assert not (tmp_path / "env").exists()


def test_by_default_uv_is_asked_for_the_exact_version(tmp_path: Path) -> None:
    downloads = {k: v for k, v in tiny_env(UV_HTTP_RETRIES="0").items() if k != "UV_PYTHON_DOWNLOADS"}
    dry = install(tmp_path / "env", "--python", "3.14", "--dry-run", env=downloads)
    assert dry.returncode == 0, dry.stderr
    assert " --python 3.14.0 " in dry.stdout  # the row's exact version, for uv to find or download
    real = install(tmp_path / "env", "--python", "3.14", env=downloads)
    if real.returncode == 0:  # a machine that can reach uv's Python downloads
        assert json.loads((tmp_path / "env" / "verl-setup.json").read_text())["python"]["version"] == "3.14.0"
    else:
        assert real.returncode == 4
        assert real.stderr.splitlines()[-1].startswith("verl-setup: error: uv (venv) failed: ")
        assert not (tmp_path / "env").exists()
        assert leftovers(tmp_path / "env") == []


STEPS = ["python", "venv", "verl", "verify", "manifest", "swap"]


def run_until(prefix: Path, step: str, sig: int) -> tuple[int, str]:
    """Start an install of tiny-new over `prefix`; send `sig` as soon as it reports `step`."""
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "verl_setup",
            "install",
            "--matrix",
            str(TINY_MATRIX),
            "--prefix",
            str(prefix),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=tiny_env(),
    )
    assert proc.stderr is not None
    seen = []
    for line in proc.stderr:
        seen.append(line)
        if f"] {step}:" in line:
            proc.send_signal(sig)
            break
    seen.append(proc.stderr.read())
    return proc.wait(timeout=TIMEOUT), "".join(seen)


CASES = [
    *[(signal.SIGINT, step) for step in STEPS],
    *[(signal.SIGKILL, step) for step in STEPS],
    (signal.SIGTERM, "install"),
    (signal.SIGTERM, "swap"),
]


@pytest.mark.parametrize(("sig", "step"), CASES, ids=[f"{sig.name}-{step}" for sig, step in CASES])
def test_an_interrupted_install_leaves_a_working_env_and_nothing_half_built(
    old_env: Path, tmp_path: Path, step: str, sig: int
) -> None:
    prefix = copy_env(old_env, tmp_path / "env")
    code, stderr = run_until(prefix, step, sig)
    # The signal lands during `step` or a little later; whichever env is at the prefix verifies.
    assert installed_row(prefix) in {"tiny-old", "tiny-new"}, stderr
    if code == 0 or "] done:" in stderr:  # the signal came after the install had finished
        assert installed_row(prefix) == "tiny-new"
        return
    if sig == signal.SIGKILL:
        assert code == -signal.SIGKILL
        result = install(prefix)  # the next run cleans up after the killed one
        assert result.returncode == 0, result.stderr
        assert installed_row(prefix) == "tiny-new"
    else:
        assert code in (130, 128 + signal.SIGTERM), stderr
        how = "interrupted by SIGINT" if sig == signal.SIGINT else "stopped by SIGTERM"
        last = stderr.rstrip().splitlines()[-1]
        assert last in (
            f"verl-setup: {how}: {prefix} is untouched (the half-built environment was removed)",
            f"verl-setup: {how} after the new environment was moved into {prefix}",
        ), stderr
    assert leftovers(prefix) == []


@pytest.mark.parametrize("delay", [0.2, 0.4, 0.6, 0.8, 1.0, 1.3])
def test_a_kill_at_any_moment_leaves_the_old_or_the_new_env(
    old_env: Path, tmp_path: Path, delay: float
) -> None:
    prefix = copy_env(old_env, tmp_path / "env")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "verl_setup",
            "install",
            "--matrix",
            str(TINY_MATRIX),
            "--prefix",
            str(prefix),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=tiny_env(),
    )
    time.sleep(delay)
    proc.kill()
    proc.wait(timeout=60)
    assert installed_row(prefix) in {"tiny-old", "tiny-new"}
    assert not any(name.startswith(".env.old-") for name in leftovers(prefix))


@contextlib.contextmanager
def tmpfs(path: Path, size: str) -> Iterator[Path]:
    path.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], check=False)
    if mounted.returncode != 0:
        pytest.skip("cannot mount a tmpfs here (needs root)")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def test_a_full_disk_is_a_clear_error_and_the_old_env_survives(old_env: Path, tmp_path: Path) -> None:
    with tmpfs(tmp_path / "small", "40m") as disk:
        prefix = copy_env(old_env, disk / "env")
        stat = os.statvfs(disk)
        free = stat.f_bavail * stat.f_frsize
        (disk / "filler").write_bytes(b"\0" * max(0, free - 64 * 1024))
        result = install(prefix)
        assert result.returncode == 4, result.stderr
        last = result.stderr.splitlines()[-1]
        assert "no space left on the filesystem of" in last, result.stderr
        (disk / "filler").unlink()
        assert installed_row(prefix) == "tiny-old"
        assert leftovers(prefix) == []


def test_a_full_uv_cache_names_the_cache_not_the_prefix(old_env: Path, tmp_path: Path) -> None:
    prefix = copy_env(old_env, tmp_path / "project" / "env")
    with tmpfs(tmp_path / "cache", "8m") as cache:
        stat = os.statvfs(cache)
        (cache / "filler").write_bytes(b"\0" * max(0, stat.f_bavail * stat.f_frsize - 16 * 1024))
        result = install(prefix, env=tiny_env(UV_CACHE_DIR=str(cache / "uv")))
        assert result.returncode == 4, result.stderr
        assert result.stderr.splitlines()[-1] == (
            f"verl-setup: error: no space left on the filesystem of the uv cache {cache / 'uv'}: free some "
            f"(`uv cache prune`) or point UV_CACHE_DIR at a bigger disk; {prefix} is untouched"
        )
    assert installed_row(prefix) == "tiny-old"
    assert leftovers(prefix) == []


def test_a_symlink_loop_prefix_is_one_line_with_the_path(tmp_path: Path) -> None:
    (tmp_path / "self").symlink_to("self")
    (tmp_path / "a").symlink_to("b")
    (tmp_path / "b").symlink_to("a")
    for prefix, culprit in ((tmp_path / "self", tmp_path / "self"), (tmp_path / "a" / "env", tmp_path / "a")):
        result = install(prefix)
        assert result.returncode == 2, result.stderr
        assert result.stderr.splitlines()[-1] == (
            f"verl-setup: error: --prefix {prefix}: {culprit} is a symlink loop (Too many levels of symbolic "
            "links); point --prefix at a real folder"
        )


def test_a_stale_staging_dir_that_cannot_be_removed_is_one_line_exit_4(old_env: Path, tmp_path: Path) -> None:
    prefix = copy_env(old_env, tmp_path / "env")
    stale = Layout(prefix=prefix).staging(2**22 + 17)  # a dead run's, with a mount on it (EBUSY)
    with tmpfs(stale, "1m"):
        (stale / "half-built").write_text("x")
        result = install(prefix)
        assert result.returncode == 4, result.stderr
        assert result.stderr.splitlines()[-1] == (
            f"verl-setup: error: cannot remove {stale}, left by an interrupted install: Device or resource "
            f"busy; remove it by hand, then run again ({prefix} is untouched)"
        )
    assert installed_row(prefix) == "tiny-old"


def test_an_unwritable_parent_is_a_clear_error_and_the_old_env_survives(
    old_env: Path, tmp_path: Path
) -> None:
    prefix = copy_env(old_env, tmp_path / "locked" / "env")
    if os.geteuid() == 0:  # root ignores permission bits; the immutable flag stops root too
        lock = ["chattr", "+i", str(prefix.parent)], ["chattr", "-i", str(prefix.parent)]
    else:
        lock = ["chmod", "555", str(prefix.parent)], ["chmod", "755", str(prefix.parent)]
    if subprocess.run(lock[0], check=False).returncode != 0:
        pytest.skip("cannot make a directory unwritable here")
    try:
        result = install(prefix)
    finally:
        subprocess.run(lock[1], check=True)
    assert result.returncode == 4
    assert f"cannot write beside {prefix}" in result.stderr.splitlines()[-1]
    assert installed_row(prefix) == "tiny-old"


def test_a_second_install_into_the_same_prefix_waits_or_fails_clearly(old_env: Path, tmp_path: Path) -> None:
    prefix = copy_env(old_env, tmp_path / "env")
    fd = os.open(Layout(prefix=prefix).lock, os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # another install (this test) holds the prefix
        os.write(fd, b"4242\n")
        refused = install(prefix, "--wait", "0")
        assert refused.returncode == 4
        assert f"another verl-setup install into {prefix} is running (pid 4242)" in refused.stderr
        waiting = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "verl_setup",
                "install",
                "--matrix",
                str(TINY_MATRIX),
                "--prefix",
                str(prefix),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env=tiny_env(),
        )
        assert waiting.stderr is not None
        for line in waiting.stderr:
            if "waiting for another install" in line:
                break
    finally:
        os.close(fd)
    assert waiting.wait(timeout=TIMEOUT) == 0
    assert installed_row(prefix) == "tiny-new"


def test_two_concurrent_installs_both_finish_one_after_the_other(old_env: Path, tmp_path: Path) -> None:
    prefix = copy_env(old_env, tmp_path / "env")
    argv = [
        sys.executable,
        "-m",
        "verl_setup",
        "install",
        "--matrix",
        str(TINY_MATRIX),
        "--prefix",
        str(prefix),
    ]
    procs = [
        subprocess.Popen(
            [*argv, *extra], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=tiny_env()
        )
        for extra in ([], ["--verl", "0.0.1"])
    ]
    results = [(p.wait(timeout=TIMEOUT), p.communicate()[1]) for p in procs]
    assert [code for code, _ in results] == [0, 0], results
    assert installed_row(prefix) in {"tiny-old", "tiny-new"}
    assert leftovers(prefix) == []
