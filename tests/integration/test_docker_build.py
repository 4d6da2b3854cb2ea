"""`verl-setup docker build` against a real engine: build the cpu row's image with BuildKit on a
local base (without --buildkit's uv cache mounts: they keep a second copy of the row's wheels in
the engine's data root, and the CI disk ran out with them; the rendered mounts are tested in
test_render and test_docker_builder), verify the pins inside it, then change one pin and see
the earlier layers reused."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import json_data, run_cli
from tests.contract import valid
from tests.integration.docker_engine import base_image, start_dockerd, unavailable
from verl_setup.image.buildkit import choose
from verl_setup.matrix.load import default_matrix_path, load_matrix

pytestmark = [pytest.mark.network, pytest.mark.slow, pytest.mark.docker, pytest.mark.serial]
HOST_CA = Path("/etc/ssl/certs/ca-certificates.crt")
# Debian 12's docker.io client (20.10) runs the engine's BuildKit itself; a Docker CLI 23+ needs
# the buildx plugin for that, which Debian 12 does not package.
DEBIAN_CLI = Path("/usr/bin/docker")
NEEDS_GIB = 14


@pytest.fixture(scope="module")
def buildkit_path(tmp_path_factory: pytest.TempPathFactory) -> str:
    """PATH with a docker CLI that reaches BuildKit first: the one on PATH, else Debian's."""
    for candidate in (shutil.which("docker"), str(DEBIAN_CLI)):
        if candidate is None or not Path(candidate).exists():
            continue
        folder = tmp_path_factory.mktemp("docker-cli")
        (folder / "docker").symlink_to(candidate)
        path = f"{folder}{os.pathsep}{os.environ.get('PATH', '')}"
        if choose({"PATH": path}).kind != "legacy":
            return path
    unavailable("no docker CLI that runs BuildKit (buildx plugin, or a Docker CLI before 23.0)")
    return ""


@pytest.fixture(scope="module")
def engine() -> Iterator[str]:
    yield from start_dockerd()


@pytest.fixture(scope="module")
def base(engine: str) -> str:
    # Imported once: a re-import gets a new image id and would invalidate every cached layer.
    return base_image(engine)


def build(
    engine_host: str, base: str, monkeypatch: pytest.MonkeyPatch, tag: str, *extra: str
) -> dict[str, object]:
    monkeypatch.setenv("DOCKER_HOST", engine_host)
    # --network host: BuildKit runs RUN in a bridge network by default, and this dockerd has none
    # (`--bridge=none`: "network bridge not found").
    args = [
        "docker", "build", "--no-gpu", "--python", "3.11.2", "--base-image", base,
        "--network", "host", "--tag", tag, "--json", *extra,
    ]  # fmt: skip
    if HOST_CA.exists():
        args += ["--ca-bundle", str(HOST_CA)]  # the package index here is re-signed by a local CA
    start = time.monotonic()
    result = run_cli(*args)
    assert result.code == 0, result.err[-4000:]
    valid(json.loads(result.out))
    report: dict[str, object] = json_data(result.out)
    report["wall"] = round(time.monotonic() - start, 1)
    return report


def test_buildkit_build_verify_label_then_a_pin_bump_reuses_the_layers(
    engine: str, base: str, buildkit_path: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import docker  # noqa: PLC0415

    monkeypatch.setenv("PATH", buildkit_path)
    # The engine's data root is under the temp dir (docker_engine.py). Measured peak: 13.2 GB (the
    # CUDA torch layer, then BuildKit's export of it); a build that runs out says less clearly why.
    free = shutil.disk_usage(tempfile.gettempdir()).free / 2**30
    assert free >= NEEDS_GIB, f"needs {NEEDS_GIB} GiB free under {tempfile.gettempdir()}, has {free:.1f}"
    first = build(engine, base, monkeypatch, "verl-setup-test:cpu")
    assert first["builder"] in ("buildkit", "buildx"), first
    assert first["verified"] is True
    assert first["python"] == "3.11.2"
    image = docker.DockerClient(base_url=engine).images.get("verl-setup-test:cpu")
    labels = image.labels
    assert labels["io.verl-setup.row-id"] == "cpu"
    assert labels["io.verl-setup.row-hash"] == load_matrix().row("cpu").content_hash()
    assert "cpu python 3.11.2" in labels["io.verl-setup.verified"]

    # Same matrix, numpy 2.2.6 -> 2.2.5 in the cpu row only: the torch layer is reused, the engine
    # and verl layers are rebuilt. (A verl bump would do too, but verl 0.9.0 imports uvicorn without
    # declaring it, and the image's import probe rightly refuses that environment.)
    text = default_matrix_path().read_text()
    head, sep, cpu = text.partition("  - id: cpu\n")
    bumped = tmp_path / "verl.yaml"
    bumped.write_text(head + sep + cpu.replace('numpy: "2.2.6"', 'numpy: "2.2.5"', 1))
    second = build(engine, base, monkeypatch, "verl-setup-test:cpu-bumped", "--matrix", str(bumped))
    cached = second["cached_steps"]
    assert isinstance(cached, list)
    assert any("torch==2.11.0" in step and "numpy==" not in step for step in cached), cached
    assert not any("numpy==2.2.5" in step for step in cached)
    assert second["seconds"] < first["seconds"]  # type: ignore[operator]
    print(f"\nfirst build {first['seconds']}s, second {second['seconds']}s; cached: {len(cached)} steps")
    for step in cached:
        print(f"  cached: {step[:100]}")


def test_print_context_lists_only_rendered_files(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")  # no engine needed
    result = run_cli("docker", "build", "--no-gpu", "--print-context", "--json")
    assert result.code == 0
    names = [f["name"] for f in json_data(result.out)["files"]]
    assert names == ["Dockerfile", ".dockerignore", "verl-setup-probe.py"]


def test_unreachable_engine_is_one_line_and_exit_4(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    result = run_cli("docker", "build", "--no-gpu", "--tag", "x:y")
    assert result.code == 4
    assert result.err.count("\n") == 1
    assert "no reachable container engine" in result.err
