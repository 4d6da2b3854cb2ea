"""Which builder `docker build` takes (buildx, the engine's BuildKit, the legacy SDK builder),
read from stand-in docker CLIs that print recorded outputs (tests/fixtures/docker/SOURCES.md),
and BuildKit's plain progress read into steps, cached steps and the failing step."""

from __future__ import annotations

import io
import stat
from pathlib import Path

import pytest

from tests.conftest import run_cli
from verl_setup.errors import InstallError
from verl_setup.image.buildkit import ImageBuilder, PlainLog, argv, build_cli, choose

FIXTURES = Path(__file__).parents[1] / "fixtures" / "docker"


def stand_in(tmp_path: Path, version: str, buildx: str, buildx_code: int) -> str:
    """A folder holding a `docker` that answers `--version` and `buildx version` as recorded."""
    folder = tmp_path / "bin"
    folder.mkdir()
    script = folder / "docker"
    script.write_text(
        "#!/bin/sh\n"
        f'if [ "$1" = --version ]; then /bin/cat {FIXTURES / version}; exit 0; fi\n'
        f'if [ "$1" = buildx ]; then /bin/cat {FIXTURES / buildx}; exit {buildx_code}; fi\n'
        "exit 64\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return str(folder)


@pytest.mark.subprocess
def test_debian_s_20_10_client_runs_the_engine_s_buildkit(tmp_path: Path) -> None:
    path = stand_in(tmp_path, "debian-20.10.version", "debian-20.10.buildx", 1)
    builder = choose({"PATH": path})
    assert (builder.kind, builder.why) == ("buildkit", "Docker CLI 20.10 with DOCKER_BUILDKIT=1")


@pytest.mark.subprocess
def test_a_client_from_23_on_without_buildx_has_only_the_legacy_builder(tmp_path: Path) -> None:
    path = stand_in(tmp_path, "docker-28.2.2.version", "docker-28.2.2.buildx", 1)
    builder = choose({"PATH": path})
    assert builder.kind == "legacy"
    assert "Docker CLI 28.2 runs BuildKit only through the buildx plugin" in builder.why


@pytest.mark.subprocess
def test_buildx_comes_first_wherever_it_answers(tmp_path: Path) -> None:
    (tmp_path / "buildx-version").write_text("github.com/docker/buildx v0.12.1\n")
    path = stand_in(tmp_path, "docker-28.2.2.version", str(tmp_path / "buildx-version"), 0)
    builder = choose({"PATH": path})
    assert (builder.kind, builder.why) == ("buildx", "github.com/docker/buildx v0.12.1")
    argv_ = argv(builder, Path("/ctx"), "t:1", network="host", iidfile=Path("/tmp/iid"))
    assert argv_[1:4] == ["buildx", "build", "--load"]
    assert argv_[-4:] == ["/tmp/iid", "--tag", "t:1", "/ctx"]
    assert argv_[argv_.index("--allow") + 1] == "network.host"


def test_no_docker_cli_or_docker_buildkit_0_means_the_legacy_builder(tmp_path: Path) -> None:
    assert choose({"PATH": str(tmp_path)}) == ImageBuilder(
        kind="legacy", docker=None, why="no docker CLI on PATH"
    )
    assert choose({"PATH": "/nonexistent", "DOCKER_BUILDKIT": "0"}).why == "DOCKER_BUILDKIT=0"


@pytest.mark.subprocess  # planning detects this machine
def test_a_buildkit_only_dockerfile_is_refused_on_the_legacy_builder_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no docker CLI: only the SDK's legacy builder
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")  # never reached
    result = run_cli("docker", "build", "--no-gpu", "--tag", "x:y", "--buildkit")
    assert result.code == 2
    assert result.err.count("\n") == 1
    assert (
        "--buildkit Dockerfiles (RUN --mount) need BuildKit, out of reach here (no docker CLI" in result.err
    )


@pytest.mark.subprocess
def test_no_engine_is_still_one_line_and_an_unavailable_builder_is_bad_input(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    result = run_cli("docker", "build", "--no-gpu", "--tag", "x:y")
    assert result.code == 4
    assert result.err.count("\n") == 1
    assert "no reachable container engine" in result.err
    asked = run_cli("docker", "build", "--no-gpu", "--tag", "x:y", "--builder", "buildx")
    assert asked.code == 2
    assert asked.err == "verl-setup: error: --builder buildx: not available here (no docker CLI on PATH)\n"


def test_plain_progress_names_the_failing_step() -> None:
    log = PlainLog()
    for line in (FIXTURES / "buildkit-0.8-plain-error.txt").read_text().splitlines():
        log.add(line)
    assert log.steps == [
        "FROM docker.io/local/debian-min:bookworm",
        "RUN --mount=type=cache,target=/root/.cache/x echo hello > /root/.cache/x/f && ls /root/.cache/x",
    ]
    assert log.error is not None
    assert str(log.error[0]).startswith("RUN --mount=type=cache")
    assert log.error[1].endswith("network bridge not found")


def test_a_failure_before_any_dockerfile_step_names_buildkit_s_own_vertex() -> None:
    log = PlainLog()
    for line in (FIXTURES / "buildkit-0.8-plain-missing-base.txt").read_text().splitlines():
        log.add(line)
    assert log.steps == []  # no Dockerfile step began
    assert log.error is not None
    assert log.error[0] == "[internal] load metadata for docker.io/local/not-imported:1"
    assert log.error[1].startswith("failed to do request: Head ")


def build_stand_in(tmp_path: Path, output: str, code: int) -> ImageBuilder:
    """A `docker` whose build prints a recorded BuildKit log, writes --iidfile, exits `code`."""
    script = tmp_path / "docker"
    script.write_text(
        "#!/bin/sh\n"
        f"/bin/cat {FIXTURES / output}\n"
        'while [ $# -gt 0 ]; do [ "$1" = --iidfile ] && printf sha256:abc > "$2"; shift; done\n'
        f"exit {code}\n"
    )
    script.chmod(0o755)
    return ImageBuilder(kind="buildkit", docker=str(script), why="stand-in")


@pytest.mark.subprocess
def test_a_failed_buildkit_build_names_its_step_and_a_passed_one_its_image(tmp_path: Path) -> None:
    failing = build_stand_in(tmp_path, "buildkit-0.8-plain-error.txt", 1)
    seen = io.StringIO()
    with pytest.raises(
        InstallError, match=r"failed at step 'RUN --mount=type=cache.*network bridge not found"
    ):
        build_cli(failing, tmp_path, "t:1", network=None, env={"PATH": "/bin"}, progress=seen)
    assert "#5 ERROR: executor failed running" in seen.getvalue()  # the log reached the user
    missing = build_stand_in(tmp_path, "buildkit-0.8-plain-missing-base.txt", 1)
    with pytest.raises(InstallError) as raised:
        build_cli(missing, tmp_path, "t:1", network=None, env={"PATH": "/bin"}, progress=seen)
    first = str(raised.value).splitlines()[0]
    assert first.startswith(
        "docker build failed at step '[internal] load metadata for docker.io/local/not-imported:1': "
        "failed to do request"
    ), first
    passing = build_stand_in(tmp_path, "debian-20.10.version", 0)
    image, log, _ = build_cli(passing, tmp_path, "t:1", network="host", env={"PATH": "/bin"}, progress=seen)
    assert image == "sha256:abc"
    assert log.steps == []


def test_plain_progress_counts_cached_steps() -> None:
    log = PlainLog()
    for line in (FIXTURES / "buildkit-0.8-plain-cached.txt").read_text().splitlines():
        log.add(line)
    assert log.error is None
    assert log.steps == [
        "FROM docker.io/local/debian-min:bookworm",
        "RUN --mount=type=cache,target=/root/.cache/x echo hello > /root/.cache/x/f && ls /root/.cache/x",
        "RUN echo done",
    ]
    assert log.cached == log.steps[1:]  # FROM is never "CACHED" in BuildKit's words
