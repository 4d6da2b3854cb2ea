"""`docker build`'s use case (image/build.py) end to end without an engine: a stand-in docker CLI
(it answers `--version` and `buildx version` as recorded, and builds by printing a recorded
BuildKit log, tests/fixtures/docker/SOURCES.md) and a stand-in engine for the Docker SDK calls
after the build (verify inside, label, the image's id)."""

from __future__ import annotations

import io
import json
import re
import stat
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import run_cli
from verl_setup.image import build as image_build
from verl_setup.image.build import ImageRequest, build_image
from verl_setup.plan.make import PlanInputs, make_plan
from verl_setup.plan.request import Request
from verl_setup.render.templates import RenderOptions

FIXTURES = Path(__file__).parents[1] / "fixtures" / "docker"
IMAGE_ID = "sha256:" + "a692c30d2e5b8cb2fa11176a0a4d7d5310f88a143bd7426b5c3e71ae183c667d"
PLAN_FLAGS = ("--no-gpu", "--python", "3.11.2", "--arch", "x86_64", "--glibc", "2.36")


def docker_cli(tmp_path: Path) -> str:
    """A folder with a Debian 20.10 `docker` (BuildKit through DOCKER_BUILDKIT=1) whose build
    prints the recorded cached BuildKit log, writes --iidfile and leaves a mark."""
    folder = tmp_path / "bin"
    folder.mkdir()
    script = folder / "docker"
    script.write_text(
        "#!/bin/sh\n"
        f'if [ "$1" = --version ]; then /bin/cat {FIXTURES / "debian-20.10.version"}; exit 0; fi\n'
        f'if [ "$1" = buildx ]; then /bin/cat {FIXTURES / "debian-20.10.buildx"}; exit 1; fi\n'
        f": > {tmp_path / 'built'}\n"
        f"/bin/cat {FIXTURES / 'buildkit-0.8-plain-cached.txt'} >&2\n"
        f'while [ $# -gt 0 ]; do [ "$1" = --iidfile ] && printf {IMAGE_ID} > "$2"; shift; done\n'
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return str(folder)


class Engine:
    """The Docker SDK calls build_image makes once the image is built, as recorded calls."""

    def __init__(self, mismatches: dict[str, list[str | None]]) -> None:
        self.mismatches = mismatches
        self.ran: list[list[str]] = []
        self.labelled: list[str] = []
        self.containers = self
        self.images = self

    def run(self, tag: str, argv: list[str], **_: Any) -> bytes:  # containers.run
        self.ran.append([tag, *argv])
        return json.dumps({"python": "3.11.2", "mismatches": self.mismatches}).encode() + b"\n"

    def build(self, *, fileobj: io.BytesIO, **_: Any) -> None:  # images.build (the label)
        self.labelled.append(fileobj.getvalue().decode())

    def get(self, _tag: str) -> Any:  # images.get
        return type("Image", (), {"id": IMAGE_ID})()


@pytest.fixture
def engine(monkeypatch: pytest.MonkeyPatch) -> Engine:
    stand_in = Engine({})
    monkeypatch.setattr(image_build, "client", lambda: stand_in)
    return stand_in


@pytest.mark.subprocess  # the stand-in docker CLI
def test_build_image_returns_its_report_and_writes_only_progress(
    tmp_path: Path, engine: Engine, capsys: pytest.CaptureFixture[str]
) -> None:
    env = {"PATH": docker_cli(tmp_path)}
    plan = make_plan(
        PlanInputs(request=Request(no_gpu=True, python="3.11.2", arch="x86_64", glibc="2.36")), env
    )
    progress = io.StringIO()
    request = ImageRequest(
        plan=plan, options=RenderOptions(targets=("docker",)), tag="t:1", context=tmp_path / "ctx"
    )
    report = build_image(request, env, progress)
    assert (report.tag, report.image, report.row, report.python) == ("t:1", IMAGE_ID, plan.row.id, "3.11.2")
    assert (report.builder, report.builder_why) == ("buildkit", "Docker CLI 20.10 with DOCKER_BUILDKIT=1")
    assert (report.steps, len(report.cached_steps), report.verified) == (3, 2, True)
    assert list(report.as_dict()) == [
        "tag", "image", "row", "seconds", "steps", "cached_steps",
        "verified", "python", "builder", "builder_why",
    ]  # fmt: skip
    said = progress.getvalue()
    assert said.startswith("verl-setup: building with buildkit (Docker CLI 20.10 with DOCKER_BUILDKIT=1)\n")
    assert f"verl-setup: building t:1 from {tmp_path / 'ctx'} (row {plan.row.id})\n" in said
    assert "#6 CACHED" in said  # the build log reached the stream it was given
    assert capsys.readouterr() == ("", "")  # nothing of its own on stdout or stderr
    assert (tmp_path / "ctx" / "Dockerfile").is_file()
    [(tag, *argv)] = engine.ran
    assert tag == "t:1"
    assert any(pin.startswith("torch==") for pin in argv[3:])  # the recipe's pins, checked inside
    [label] = engine.labelled
    assert f'LABEL io.verl-setup.verified="{plan.row.id} python 3.11.2 at ' in label


@pytest.mark.subprocess
@pytest.mark.usefixtures("engine")
def test_docker_build_prints_one_line_or_the_envelope(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", docker_cli(tmp_path))
    text = run_cli("docker", "build", *PLAN_FLAGS, "--tag", "t:1", "-q")
    assert text.code == 0, text.err
    assert re.fullmatch(
        r"built t:1 \(sha256:a692c30d2e5b\) for \S+ in \d+\.\ds with buildkit, 2/3 steps from cache; "
        r"pins verified \(Python 3\.11\.2\)\n",
        text.out,
    ), text.out
    assert "#6 CACHED" not in text.err  # -q: no build log
    as_json = run_cli("docker", "build", *PLAN_FLAGS, "--tag", "t:1", "--json")
    data = json.loads(as_json.out)["data"]
    assert (data["image"], data["steps"], data["verified"], data["builder"]) == (
        IMAGE_ID,
        3,
        True,
        "buildkit",
    )


@pytest.mark.subprocess
def test_pins_unsatisfied_inside_the_image_fail_the_check_and_label_nothing(
    tmp_path: Path, engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine.mismatches = {"numpy": ["2.2.6", "2.2.5"]}
    monkeypatch.setenv("PATH", docker_cli(tmp_path))
    result = run_cli("docker", "build", *PLAN_FLAGS, "--tag", "t:1", "-q")
    assert result.code == 5
    assert result.err.endswith(
        "\nverl-setup: error: t:1: pins not satisfied inside the image: {'numpy': ['2.2.6', '2.2.5']}\n"
    )
    assert engine.labelled == []


@pytest.mark.subprocess
@pytest.mark.usefixtures("engine")
def test_a_changed_file_in_out_builds_nothing_without_force(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", docker_cli(tmp_path))
    out = tmp_path / "ctx"
    out.mkdir()
    (out / "Dockerfile").write_text("FROM scratch\n")
    result = run_cli("docker", "build", *PLAN_FLAGS, "--tag", "t:1", "--out", str(out))
    assert result.code == 2
    assert result.err.endswith(
        f"verl-setup: error: Dockerfile in {out} differ from what would be rendered; "
        "nothing was built. --force overwrites\n"
    )
    assert not (tmp_path / "built").exists()
    forced = run_cli("docker", "build", *PLAN_FLAGS, "--tag", "t:1", "--out", str(out), "--force", "-q")
    assert forced.code == 0, forced.err
    assert (tmp_path / "built").exists()
    assert (out / "Dockerfile").read_text() != "FROM scratch\n"
