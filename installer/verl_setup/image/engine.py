"""Docker images: build a rendered context through the Docker SDK (DOCKER_HOST is honoured, so a
podman socket works too), verify the pins inside the image, label the verified image, push.
image/build.py renders the context and drives these steps."""

from __future__ import annotations

import io
import json
import re
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    from verl_setup.render.templates import RenderedFile

from verl_setup.errors import CheckFailedError, InstallError
from verl_setup.scripts import script_text

_STEP_RE = re.compile(r"^Step (\d+)/(\d+) : (.*)$")


@dataclass(frozen=True, kw_only=True)
class ContextEntry:
    """One file the build context would send."""

    name: str
    size: int


@dataclass(kw_only=True)
class BuildLog:
    """What the build printed, step by step, and which steps came from the cache."""

    steps: list[str] = field(default_factory=list)
    cached: list[str] = field(default_factory=list)
    tail: list[str] = field(default_factory=list)

    def add(self, line: str) -> None:
        """Record one line of build output."""
        m = _STEP_RE.match(line)
        if m:
            self.steps.append(m[3])
        elif "Using cache" in line and self.steps:
            self.cached.append(self.steps[-1])
        self.tail = [*self.tail[-39:], line]


def describe_context(files: list[RenderedFile]) -> list[ContextEntry]:
    """Names and sizes of what `docker build` would send."""
    return [ContextEntry(name=f.name, size=len(f.content.encode())) for f in files]


def client() -> Any:
    """A Docker SDK client from the environment (DOCKER_HOST, DOCKER_TLS_VERIFY, ...), pinged."""
    try:
        import docker  # noqa: PLC0415  # heavy; only this command needs it
    except ImportError as exc:  # an optional extra: only this command needs it
        raise InstallError(
            "the `docker` Python package is missing: install verl-setup[docker] (or pip install docker)"
        ) from exc
    try:
        engine = docker.from_env(timeout=30)
        engine.ping()
    except Exception as exc:  # the SDK raises many types for "no engine"
        raise InstallError(
            f"no reachable container engine ({_first_line(exc)}): start dockerd or podman, "
            "or point DOCKER_HOST at its socket"
        ) from exc
    return engine


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:200] if text else type(exc).__name__


def build(
    engine: Any,
    context: Path,
    tag: str,
    *,
    network: str | None,
    build_args: dict[str, str],
    progress: TextIO,
) -> tuple[str, BuildLog, float]:
    """Build `context` as `tag`; stream progress; InstallError names the failing step."""
    log = BuildLog()
    start = time.monotonic()
    try:
        stream: Iterator[dict[str, Any]] = engine.api.build(
            path=str(context),
            tag=tag,
            rm=True,
            forcerm=True,
            decode=True,
            network_mode=network,
            buildargs=build_args or None,
        )
        image_id = None
        for chunk in stream:
            if "error" in chunk:
                _fail_step(log, str(chunk["error"]))
            text = chunk.get("stream", "")
            for line in text.splitlines():
                if line.strip():
                    log.add(line.rstrip())
                    progress.write(line.rstrip() + "\n")
            if "aux" in chunk and "ID" in chunk["aux"]:
                image_id = chunk["aux"]["ID"]
    except InstallError:
        raise
    except Exception as exc:  # API and connection errors from the SDK
        raise InstallError(f"docker build could not run: {_first_line(exc)}") from exc
    if image_id is None:
        image_id = engine.images.get(tag).id
    return str(image_id), log, time.monotonic() - start


def _fail_step(log: BuildLog, error: str) -> None:
    """Name the step that failed and show the end of its log."""
    raise step_failed(log.steps[-1] if log.steps else None, error, log.tail)


def step_failed(step: str | None, error: str, tail: list[str]) -> InstallError:
    """The error for a failed build step (any builder), with the end of the log."""
    shown = "\n".join(tail[-15:])
    return InstallError(
        f"docker build failed at step {step or '(before the first step)'!r}: {error.strip()}\n{shown}"
    )


def verify_in_image(engine: Any, tag: str, pins: list[str]) -> dict[str, Any]:
    """Run the pin check inside the image with its own Python."""
    try:
        output = engine.containers.run(
            tag, ["python", "-c", script_text("image_verify"), *pins], remove=True, network_mode="none"
        )
    except Exception as exc:  # ContainerError, ImageNotFound, APIError
        raise CheckFailedError(f"verify inside {tag} could not run: {_first_line(exc)}") from exc
    result: dict[str, Any] = json.loads(output.decode().strip().splitlines()[-1])
    return result


def label_verified(engine: Any, tag: str, row_id: str, python: str) -> None:
    """Add `io.verl-setup.verified` to the image: a one-instruction build on top of it."""
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    value = f"{row_id} python {python} at {stamp}".replace('"', "")
    dockerfile = f'FROM {tag}\nLABEL io.verl-setup.verified="{value}"\n'
    try:
        engine.images.build(fileobj=io.BytesIO(dockerfile.encode()), tag=tag, rm=True)
    except Exception as exc:
        raise InstallError(f"could not label {tag}: {_first_line(exc)}") from exc


def push(engine: Any, tag: str) -> None:
    repository, _, version = tag.rpartition(":") if ":" in tag.rsplit("/", 1)[-1] else (tag, "", "latest")
    for chunk in engine.images.push(repository, tag=version, stream=True, decode=True):
        if "error" in chunk:
            raise InstallError(f"push of {tag} failed: {chunk['error']}")
        if chunk.get("status"):
            sys.stderr.write(f"{chunk['status']} {chunk.get('progress', '')}\n")
