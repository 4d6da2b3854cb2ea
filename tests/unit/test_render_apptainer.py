"""`render apptainer`: the definition file read by Apptainer's own rules, cross-checked with
spython's Singularity recipe parser, its scripts through shellcheck, hostile values kept values.

Apptainer is not in Debian 12's archive, so no real `apptainer build` runs here. The reader below
follows Apptainer's parser (pkg/build/types/parser/deffile.go): a line whose first word starts
with % opens a section; the header before it is `key: value` lines of known keys (comments
skipped); %labels are `KEY VALUE`, split at the first space; %files are `SRC DST`."""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.render_scenarios import HOSTILE_HF_HOME, SCENARIOS, Scenario, plan_for, render_scenario
from tests.unit.test_render import tool
from verl_setup.errors import BadInputError
from verl_setup.render.templates import RenderOptions, render

IDS = [s.name for s in SCENARIOS]
# deffile.go's validSections and validHeaders (the keys a `Bootstrap: docker` header may use).
SECTIONS = {
    "help", "setup", "files", "labels", "environment", "pre", "post", "runscript", "test", "startscript",
    "arguments",
}  # fmt: skip
HEADERS = {"bootstrap", "from", "registry", "namespace", "includecmd", "stage", "fingerprints"}


@dataclass
class Definition:
    header: dict[str, str]
    sections: dict[str, tuple[str, str]]  # name -> (arguments after the name, body)

    def labels(self) -> dict[str, str]:
        pairs = [line.strip().split(" ", 1) for line in self.body("labels").splitlines()]
        return {p[0]: p[1].strip() for p in pairs if p[0] and not p[0].startswith("#")}

    def files(self) -> list[tuple[str, str]]:
        lines = [line.split() for line in self.body("files").splitlines() if line.strip()]
        return [(src, dst) for src, dst in lines]

    def body(self, name: str) -> str:
        return self.sections[name][1]


def parse(text: str) -> Definition:
    """Apptainer's reading of a definition file; an error where Apptainer errs."""
    header_lines: list[str] = []
    sections: dict[str, tuple[str, str]] = {}
    current: str | None = None
    for line in text.splitlines():
        words = line.split()
        if words and words[0].startswith("%"):
            current = words[0][1:].lower()
            assert current in SECTIONS, f"invalid section %{current}"
            assert current not in sections, f"%{current} twice"
            sections[current] = (" ".join(words[1:]), "")
        elif current is None:
            header_lines.append(line)
        else:
            args, body = sections[current]
            sections[current] = (args, body + line + "\n")
    header = {}
    for line in header_lines:
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        key, sep, value = stripped.split("#")[0].partition(":")
        assert sep, f"header key {key} had no val"
        assert key.strip().lower() in HEADERS, f"invalid header keyword found: {key}"
        assert not value.strip().endswith("\\"), "a header value ending in \\ continues on the next line"
        header[key.strip().lower()] = value.strip()
    return Definition(header=header, sections=sections)


def definition(scenario: Scenario) -> str:
    (found,) = [f.content for f in render_scenario(scenario, ("apptainer",)) if f.name == "verl.def"]
    return found


@pytest.mark.parametrize("scenario", SCENARIOS, ids=IDS)
def test_definition_reads_as_apptainer_reads_it(scenario: Scenario) -> None:
    plan = plan_for(scenario)
    parsed = parse(definition(scenario))
    assert parsed.header == {
        "bootstrap": "docker",
        "from": plan.row.docker.base_image if plan.row.docker else "ubuntu:24.04",
    }
    assert {"labels", "files", "environment", "post", "runscript", "test", "help"} <= set(parsed.sections)
    labels = parsed.labels()
    assert labels["io.verl-setup.row-id"] == plan.row.id
    assert labels["io.verl-setup.row-hash"] == plan.row.content_hash()
    assert labels["io.verl-setup.matrix-sha256"] == plan.matrix.sha256
    assert labels["io.verl-setup.python"] == plan.python
    assert parsed.files() == [("verl-setup-probe.py", "/etc/verl-setup/probe.py")]
    assert parsed.sections["post"][0] == "-c /bin/bash"
    assert "{{" not in definition(scenario)  # Apptainer 1.2+ would read it as a build argument


@pytest.mark.parametrize("scenario", SCENARIOS, ids=IDS)
def test_spython_reads_the_same_header_labels_and_files(scenario: Scenario) -> None:
    from spython.main.parse.parsers import SingularityParser  # noqa: PLC0415  # test-only dependency

    text = definition(scenario)
    ours = parse(text)
    path = Path(os.environ.get("TMPDIR", "/tmp")) / f"verl-setup-{os.getpid()}-{scenario.name}.def"
    path.write_text(text)
    try:
        (recipe,) = SingularityParser(str(path)).recipe.values()
    finally:
        path.unlink()
    assert recipe.fromHeader == ours.header["from"]
    assert dict(label.split(" ", 1) for label in recipe.labels) == ours.labels()
    assert recipe.files == [f"{src} {dst}" for src, dst in ours.files()]
    assert "uv venv --python " + plan_for(scenario).python + " /opt/verl" in recipe.install


@pytest.mark.parametrize("scenario", SCENARIOS, ids=IDS)
@pytest.mark.subprocess
def test_definition_scripts_pass_shellcheck(scenario: Scenario, tmp_path: Path) -> None:
    shellcheck = tool("shellcheck")
    parsed = parse(definition(scenario))
    scripts = []
    # %post runs under -c /bin/bash; Apptainer writes the others into /bin/sh scripts.
    for name, shell in (("post", "bash"), ("environment", "sh"), ("runscript", "sh"), ("test", "sh")):
        path = tmp_path / f"{name}.sh"
        path.write_text(f"#!/bin/{shell}\n" + parsed.body(name))
        scripts.append(str(path))
    out = subprocess.run(
        [shellcheck, "--severity=style", *scripts], capture_output=True, text=True, check=False
    )
    assert out.returncode == 0, out.stdout


@pytest.mark.subprocess
def test_hostile_values_stay_values_in_the_environment_section(tmp_path: Path) -> None:
    (hostile,) = [s for s in SCENARIOS if s.name == "hostile"]
    env = parse(definition(hostile)).body("environment")
    (tmp_path / "environment").write_text(env)
    shown = subprocess.run(
        ["sh", "-c", '. ./environment && printf "%s\\n" "$HF_HOME" "$NCCL_SOCKET_IFNAME"'],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    )
    assert shown.stdout.splitlines() == [HOSTILE_HF_HOME, "eth0;touch pwned-iface"]
    assert not list(tmp_path.glob("pwned*"))


def test_a_value_that_would_open_a_section_or_a_build_argument_is_refused() -> None:
    (cpu,) = [s for s in SCENARIOS if s.name == "cpu"]
    plan = plan_for(cpu)
    for hf_home in ("/data/hf\n%post\ntouch /pwned", "/data/{{ token }}"):
        with pytest.raises(BadInputError, match=r"line break|Apptainer definition"):
            render(plan, RenderOptions(targets=("apptainer",), hf_home=hf_home))


def test_ca_bundle_and_probe_travel_once_beside_the_definition(tmp_path: Path) -> None:
    (cpu,) = [s for s in SCENARIOS if s.name == "cpu"]
    bundle = tmp_path / "corp.pem"
    bundle.write_text("-----BEGIN CERTIFICATE-----\n")
    files = render(plan_for(cpu), RenderOptions(targets=("docker", "apptainer"), ca_bundle=bundle))
    names = [f.name for f in files]
    assert names == ["Dockerfile", ".dockerignore", "verl-setup-probe.py", "verl.def", "ca-bundle.crt"]
    parsed = parse(next(f.content for f in files if f.name == "verl.def"))
    assert ("ca-bundle.crt", "/etc/verl-setup/ca-bundle.crt") in parsed.files()
    assert "SSL_CERT_FILE=/etc/verl-setup/ca-bundle.crt" in parsed.body("post")
