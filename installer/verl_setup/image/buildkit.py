"""Which builder builds a rendered Dockerfile, and a build through the docker CLI.

The Docker SDK speaks only the legacy builder (docker/docker-py#2230), which refuses `RUN
--mount`. BuildKit is reached through the CLI instead: `docker buildx build` where the buildx
plugin exists; else `DOCKER_BUILDKIT=1 docker build`, which a Docker CLI before 23.0 (Debian 12's
docker.io is 20.10) runs against the engine's own BuildKit, while 23.0 and later hand BuildKit to
the buildx plugin only; else the legacy builder through the SDK (image/engine.py).
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, TextIO

from verl_setup.errors import InstallError
from verl_setup.image.engine import BuildLog, step_failed
from verl_setup.util.runner import ProgramError, follow, run

BuilderKind = Literal["buildx", "buildkit", "legacy"]
BUILDERS = ("auto", "buildx", "buildkit", "legacy")  # --builder
BUILD_TIMEOUT_S = 6 * 3600.0  # a flash-attn build in the image takes an hour or more
_CLI_VERSION = re.compile(r"Docker version (\d+)\.(\d+)")
# --progress=plain: "#5 [stage-0 2/3] RUN ..." (BuildKit 0.8) or "#5 [2/3] RUN ..." (newer).
_STEP = re.compile(r"^#(\d+) \[(?:[^\]]*\s)?\d+/\d+\] (.*)$")
_STATE = re.compile(r"^#(\d+) (CACHED|ERROR: .*)$")
_VERTEX = re.compile(r"^#(\d+) (\S.*)$")  # a vertex's first line is its name (BuildKit's own ones too)


@dataclass(frozen=True, kw_only=True)
class ImageBuilder:
    """The builder chosen, the docker CLI that drives it, and why, in a few words."""

    kind: BuilderKind
    docker: str | None
    why: str


def choose(env: Mapping[str, str]) -> ImageBuilder:
    """buildx if the docker CLI has the plugin, else the engine's BuildKit through a CLI that
    still speaks it (< 23.0), else the legacy builder."""
    if env.get("DOCKER_BUILDKIT") == "0":  # the user's own choice, as the docker CLI reads it
        return ImageBuilder(kind="legacy", docker=None, why="DOCKER_BUILDKIT=0")
    docker = shutil.which("docker", path=env.get("PATH", os.defpath))
    if docker is None:
        return ImageBuilder(kind="legacy", docker=None, why="no docker CLI on PATH")
    return _ask(docker, env)


def _ask(docker: str, env: Mapping[str, str]) -> ImageBuilder:
    """What this docker CLI offers: `buildx version` answers, or its own version is before 23.0."""
    try:
        buildx = run([docker, "buildx", "version"], timeout=20, env=env)
        version = run([docker, "--version"], timeout=20, env=env)
    except ProgramError as exc:
        return ImageBuilder(kind="legacy", docker=docker, why=f"the docker CLI did not answer ({exc})")
    if buildx.returncode == 0:
        return ImageBuilder(kind="buildx", docker=docker, why=_first(buildx.stdout) or "docker buildx")
    found = _CLI_VERSION.search(version.stdout)
    if found is None:
        return ImageBuilder(
            kind="legacy", docker=docker, why=f"unreadable `docker --version`: {_first(version.stdout)!r}"
        )
    cli = f"{found[1]}.{found[2]}"
    if int(found[1]) < 23:
        return ImageBuilder(kind="buildkit", docker=docker, why=f"Docker CLI {cli} with DOCKER_BUILDKIT=1")
    return ImageBuilder(
        kind="legacy",
        docker=docker,
        why=f"Docker CLI {cli} runs BuildKit only through the buildx plugin, which is not installed",
    )


def _first(text: str) -> str:
    lines = text.strip().splitlines()
    return lines[0].strip()[:120] if lines else ""


class PlainLog(BuildLog):
    """BuildKit's --progress=plain output: steps by vertex number, CACHED and ERROR per vertex."""

    def __init__(self) -> None:
        super().__init__()
        self.vertices: dict[str, str] = {}
        self.error: tuple[str | None, str] | None = None

    def add(self, line: str) -> None:
        """Record one line of build output. A failure names its vertex: a Dockerfile step, or one of
        BuildKit's own (loading the base image's metadata, exporting the image)."""
        if (m := _STEP.match(line)) and m[1] not in self.vertices:
            self.vertices[m[1]] = m[2]
            self.steps.append(m[2])
        elif (m := _VERTEX.match(line)) and m[1] not in self.vertices:
            self.vertices[m[1]] = m[2]
        elif (m := _STATE.match(line)) and m[1] in self.vertices:
            if m[2] == "CACHED":
                if self.vertices[m[1]] in self.steps:
                    self.cached.append(self.vertices[m[1]])
            elif self.error is None:
                self.error = (self.vertices[m[1]], m[2].removeprefix("ERROR: "))
        self.tail = [*self.tail[-39:], line]


def argv(builder: ImageBuilder, context: Path, tag: str, *, network: str | None, iidfile: Path) -> list[str]:
    """The build command for a CLI builder."""
    assert builder.docker is not None  # noqa: S101  # only CLI builders get here
    head = (
        [builder.docker, "buildx", "build", "--load"]
        if builder.kind == "buildx"
        else [builder.docker, "build"]
    )
    net = ["--network", network] if network else []
    if builder.kind == "buildx" and network == "host":
        net += ["--allow", "network.host"]  # an entitlement under buildx
    return [*head, "--progress=plain", *net, "--iidfile", str(iidfile), "--tag", tag, str(context)]


def build_cli(
    builder: ImageBuilder,
    context: Path,
    tag: str,
    *,
    network: str | None,
    env: Mapping[str, str],
    progress: TextIO,
) -> tuple[str, PlainLog, float]:
    """Build `context` as `tag` with BuildKit, each line to `progress`; InstallError names the
    failing step."""
    log = PlainLog()
    child_env = {**env, "DOCKER_BUILDKIT": "1"} if builder.kind == "buildkit" else dict(env)
    start = time.monotonic()

    def on_line(line: str) -> None:
        if line.strip():
            log.add(line.rstrip())
            progress.write(line.rstrip() + "\n")

    with tempfile.TemporaryDirectory(prefix="verl-setup-iid-") as tmp:
        iidfile = Path(tmp) / "iid"
        try:
            code = follow(
                argv(builder, context, tag, network=network, iidfile=iidfile),
                timeout=BUILD_TIMEOUT_S,
                on_line=on_line,
                env=child_env,
            )
        except ProgramError as exc:
            raise InstallError(f"docker build could not run: {exc}") from exc
        if code != 0:
            step, error = log.error or (None, _first("\n".join(log.tail[-1:])))
            raise step_failed(step, error, log.tail)
        image_id = iidfile.read_text(encoding="utf-8").strip() if iidfile.exists() else ""
    if not image_id:
        raise InstallError(f"docker build of {tag} reported success but wrote no image id")
    return image_id, log, time.monotonic() - start
