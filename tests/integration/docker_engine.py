"""A real Docker engine for the tests: Debian's dockerd on a private socket, and a local base
image made with debootstrap (nothing can be pulled from a registry here)."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

BASE_IMAGE = "local/debian-min:bookworm"
# No bridge and no iptables: this sandbox cannot create them; builds use --network host.
DOCKERD_FLAGS = ("--bridge=none", "--iptables=false", "--ip6tables=false")
# A rootfs tarball is slow to make (debootstrap ~40 s); keep it between runs on this machine.
ROOTFS_CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "verl-setup-tests"


def unavailable(reason: str) -> None:
    """In CI a missing engine fails loudly; on a developer machine it skips with the reason."""
    if os.environ.get("CI"):
        pytest.fail(f"container engine unavailable in CI: {reason}")
    pytest.skip(reason)


def start_dockerd() -> Iterator[str]:
    """Start dockerd with the flags that work in this sandbox; yield its DOCKER_HOST."""
    dockerd = shutil.which("dockerd")
    if dockerd is None:
        unavailable("dockerd is not installed (apt-get install docker.io)")
        return
    root = Path(tempfile.mkdtemp(prefix="vsd", dir="/tmp"))  # short: unix socket paths are limited
    host = f"unix://{root}/docker.sock"
    log = (root / "dockerd.log").open("wb")
    proc = subprocess.Popen(  # fixed argv
        [dockerd, *DOCKERD_FLAGS, "-H", host, *_folders(root)],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        import docker  # noqa: PLC0415

        deadline = time.monotonic() + 40
        while True:
            try:
                docker.DockerClient(base_url=host, timeout=5).ping()
                break
            except Exception as exc:  # noqa: BLE001  # not up yet
                if proc.poll() is not None or time.monotonic() > deadline:
                    tail = (root / "dockerd.log").read_text(errors="replace")[-1500:]
                    unavailable(f"dockerd did not start ({exc}): {tail}")
                time.sleep(0.5)
        yield host
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
        for mounted in ("data", "exec/netns/default", "exec"):  # what dockerd may leave mounted
            subprocess.run(["umount", "-R", str(root / mounted)], capture_output=True, check=False)
        shutil.rmtree(root, ignore_errors=True)


def _folders(root: Path) -> list[str]:
    return [
        "--data-root",
        str(root / "data"),
        "--exec-root",
        str(root / "exec"),
        "--pidfile",
        str(root / "pid"),
    ]


def base_image(host: str) -> str:
    """Import a minimal Debian rootfs as BASE_IMAGE into the engine at `host`."""
    import docker  # noqa: PLC0415

    tarball = ROOTFS_CACHE / "debian-minbase-bookworm.tar"
    if not tarball.exists():
        debootstrap = shutil.which("debootstrap")
        if debootstrap is None:
            unavailable("debootstrap is not installed (apt-get install debootstrap)")
        ROOTFS_CACHE.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix="rootfs", dir="/tmp") as rootfs:
            made = subprocess.run(
                [str(debootstrap), "--variant=minbase", "bookworm", rootfs],
                capture_output=True,
                text=True,
                timeout=900,
                check=False,
            )
            if made.returncode != 0:
                unavailable(f"debootstrap failed: {made.stderr[-800:]}")
            partial = tarball.with_suffix(".part")
            subprocess.run(["tar", "-C", rootfs, "-cf", str(partial), "."], check=True)
            partial.replace(tarball)
    client = docker.DockerClient(base_url=host, timeout=600)
    repository, _, tag = BASE_IMAGE.partition(":")
    client.api.import_image_from_file(str(tarball), repository=repository, tag=tag)
    return BASE_IMAGE
