"""doctor's hf-cache check on real directories: made unwritable for real (an unprivileged user; a
read-only bind mount), real free space (a small tmpfs), and huggingface_hub's own resolution.

The tests run as root, which ignores file modes: a write test as root proves nothing, so the
unwritable cases drop to `nobody` in a forked child, or mount the folder read-only in a private
mount namespace (`unshare -m`). Either is skipped where the machine does not allow it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import json_data, run_cli
from verl_setup.doctor.checks.hf_cache import cache_result, resolve_paths

NOBODY = 65534
SECRET = "hf_doctorMustNeverPrintThis123"  # noqa: S105  # a planted fake token, asserted absent


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A root-owned 0755 folder under /tmp: others may enter it but not write to it."""
    folder = Path(tempfile.mkdtemp(prefix="hfd", dir="/tmp"))
    folder.chmod(0o755)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(autouse=True)
def _hf_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HF_HOME", "HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "TRANSFORMERS_CACHE", "HF_HUB_OFFLINE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HF_TOKEN", SECRET)


def doctor(*args: str) -> tuple[int, dict[str, Any], str]:
    result = run_cli("doctor", "--json", "--check", "hf-cache", "--prefix", sys.prefix, *args)
    (check,) = json_data(result.out)["checks"]
    text = run_cli("doctor", "--check", "hf-cache", "--prefix", sys.prefix, *args).out
    assert SECRET not in result.out + result.err + text
    return result.code, check, text


def evidence(check: dict[str, Any], name: str) -> str:
    return next(str(e["value"]) for e in check["evidence"] if e["name"] == name)


def test_fresh_cache_under_a_writable_folder_passes_with_hubs_own_paths(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    code, check, _ = doctor("--model-size", "1GB")
    assert check["status"] == "pass", check
    assert evidence(check, "hub cache") == str(tmp_path / "hf" / "hub")
    source = next(e["source"] for e in check["evidence"] if e["name"] == "hub cache")
    assert source.startswith("huggingface_hub ")  # the library's constants, not our copy of its rules
    assert "wrote and removed a file in" in evidence(check, "write test")
    assert not (tmp_path / "hf").exists()  # the doctor creates nothing
    assert code == 0


def _as_nobody(hf_home: Path, tmp: Path) -> dict[str, Any]:
    """Run the filesystem half of the check in a child that really is uid 65534."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: drop every privilege, then touch the disk
        answer: dict[str, Any]
        try:
            os.close(read_end)
            os.setgroups([])
            os.setgid(NOBODY)
            os.setuid(NOBODY)
        except PermissionError as exc:
            answer = {"skip": f"cannot switch to uid {NOBODY} here: {exc}"}
        else:
            try:
                paths = resolve_paths({"HF_HOME": str(hf_home), "HOME": "/nonexistent"}, None, "test")
                result = cache_result(paths, need=0.001, need_source="test", tmp=tmp, model=None)
                answer = {"uid": os.getuid(), **result.to_json()}
            except Exception as exc:  # noqa: BLE001  # reported to the parent, which fails the test
                answer = {"error": f"{type(exc).__name__}: {exc}"}
        os.write(write_end, json.dumps(answer).encode())
        os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        data = json.loads(pipe.read())
    os.waitpid(pid, 0)
    if "skip" in data:
        pytest.skip(data["skip"])
    assert "error" not in data, data["error"]
    return dict(data)


def test_cache_in_a_folder_the_user_cannot_write_fails_for_that_user(shared_dir: Path) -> None:
    report = _as_nobody(shared_dir / "hf", Path("/tmp"))
    assert report["uid"] == NOBODY
    assert report["status"] == "fail"
    assert f"cannot create a file in {shared_dir}: Permission denied (EACCES)" in report["summary"]
    assert "HF_HOME" in report["remedy"]
    # The same folder passes for root: file modes alone would have said "writable" to a root check.
    paths = resolve_paths({"HF_HOME": str(shared_dir / "hf")}, None, "test")
    assert cache_result(paths, need=0.001, need_source="t", tmp=Path("/tmp"), model=None).status == "pass"


def test_cache_behind_a_folder_the_user_cannot_enter_fails() -> None:
    locked = Path(tempfile.mkdtemp(prefix="hfl", dir="/tmp"))  # 0700, root's
    try:
        report = _as_nobody(locked / "hf", Path("/tmp"))
        assert report["status"] == "fail"
        assert f"cannot look into {locked}" in report["summary"]
    finally:
        shutil.rmtree(locked, ignore_errors=True)


def _private_mount(script: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    probe = subprocess.run(
        ["unshare", "-m", "sh", "-c", "mount -t tmpfs -o size=1m tmpfs /mnt"],
        capture_output=True,
        check=False,
        timeout=10,
    )
    if probe.returncode != 0:
        pytest.skip(f"no private mount namespace here: {probe.stderr.decode(errors='replace').strip()}")
    return subprocess.run(
        ["unshare", "-m", "sh", "-c", script],
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )


def _doctor_line(*args: str) -> str:
    argv = [
        sys.executable,
        "-m",
        "verl_setup",
        "doctor",
        "--json",
        "--check",
        "hf-cache",
        "--prefix",
        sys.prefix,
    ]
    return " ".join(f"'{a}'" for a in [*argv, *args])


def test_read_only_mount_fails_the_write_test_even_for_root(shared_dir: Path) -> None:
    env = {**os.environ, "HF_HOME": str(shared_dir / "hf")}
    script = f"mount --bind -o ro '{shared_dir}' '{shared_dir}' && exec {_doctor_line('--model-size', '1MB')}"
    out = _private_mount(script, env)
    assert out.returncode == 5, out.stderr
    (check,) = json_data(out.stdout)["checks"]
    assert f"cannot create a file in {shared_dir}: Read-only file system (EROFS)" in check["summary"]


def test_small_tmpfs_is_too_small_for_the_model_and_a_full_temp_dir(shared_dir: Path) -> None:
    env = {**os.environ, "HF_HOME": str(shared_dir / "hf"), "TMPDIR": str(shared_dir)}
    script = f"mount -t tmpfs -o size=64m tmpfs '{shared_dir}' && exec {_doctor_line('--model-size', '2GB')}"
    out = _private_mount(script, env)
    assert out.returncode == 5, out.stderr
    (check,) = json_data(out.stdout)["checks"]
    failed = [f["message"] for f in check["findings"] if f["status"] == "fail"]
    assert any(m.startswith("0.1 GiB free for the cache") and "needs 2 GiB" in m for m in failed), failed
    assert any(m.startswith(f"the temp dir {shared_dir} is full") for m in failed), failed
    assert evidence(check, "free in cache") == "0.1 GiB"  # statvfs of the 64 MiB tmpfs


def test_offline_with_an_empty_cache_and_a_model_to_load(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    code, check, _ = doctor(
        "--model-size", "1MB", "--", "python3", "-m", "verl.trainer.main_ppo",
        "actor_rollout_ref.model.path=Qwen/Qwen2.5-0.5B-Instruct",
    )  # fmt: skip
    assert check["status"] == "fail"
    assert check["summary"].startswith("offline mode, and Qwen/Qwen2.5-0.5B-Instruct is not in the cache")
    assert code == 5


def test_transformers_cache_elsewhere_is_two_caches(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("TRANSFORMERS_CACHE", str(tmp_path / "tf"))
    code, check, text = doctor("--model-size", "1MB")
    assert check["status"] == "warn"
    assert check["summary"].startswith(f"two caches: transformers reads TRANSFORMERS_CACHE={tmp_path / 'tf'}")
    assert "WARN  hf-cache" in text
    assert code == 0
