"""Fuzzing every parser and CLI boundary of issue 14 with hypothesis.

Each target must answer any input with a value or one clean error line: never another
exception (a crash), never more than HANG_SECONDS (a hang), never a line break in an error.
`make test` runs a small fixed-seed slice (profile "ci"); `make fuzz` runs the "fuzz" profile
(VERL_SETUP_FUZZ_EXAMPLES per target, random seeds) and prints how many inputs each target saw.
"""

from __future__ import annotations

import atexit
import collections
import contextlib
import json
import os
import re
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from types import FrameType
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from tests.conftest import FIXTURES, NVIDIA, run_cli
from tests.conftest import host as host_facts
from verl_setup.errors import BadInputError
from verl_setup.host.facts import load_host_file
from verl_setup.host.nvidia import parse_banner, parse_nvml, parse_query_csv, parse_smi_xml, pci_device_id
from verl_setup.matrix.gpus import load_gpu_table
from verl_setup.matrix.load import check
from verl_setup.util.versions import DriverVersion, parse_count, parse_minor, parse_python
from verl_setup.util.yamlread import YamlError, read_yaml

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10 reads TOML with tomli (a dependency there)
    import tomli as tomllib

HANG_SECONDS = 5.0
settings.register_profile(
    "base",
    database=None,  # no .hypothesis folder in the tree
    deadline=None,  # the watchdog below decides what a hang is, not hypothesis' timing
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)
settings.register_profile("ci", settings.get_profile("base"), max_examples=25, derandomize=True)
settings.register_profile(
    "fuzz", settings.get_profile("base"), max_examples=int(os.environ.get("VERL_SETUP_FUZZ_EXAMPLES", "1500"))
)
settings.load_profile(os.environ.get("VERL_SETUP_FUZZ_PROFILE", "ci"))

SEEN: collections.Counter[str] = collections.Counter()


def _report() -> None:
    if os.environ.get("VERL_SETUP_FUZZ_PROFILE") == "fuzz" and SEEN:
        lines = [f"fuzz: {count:6d} inputs  {target}" for target, count in sorted(SEEN.items())]
        lines.append(
            f"fuzz: {sum(SEEN.values()):6d} inputs in all (a failure above would be a crash or hang)"
        )
        sys.__stderr__.write("\n" + "\n".join(lines) + "\n")  # type: ignore[union-attr]
        if path := os.environ.get("VERL_SETUP_FUZZ_REPORT"):
            with open(path, "a", encoding="utf-8") as handle:  # noqa: PTH123  # one line per worker
                handle.write(json.dumps(dict(SEEN)) + "\n")


atexit.register(_report)


class HangError(Exception):
    """A target ran past HANG_SECONDS."""


@contextlib.contextmanager
def watchdog(target: str) -> Iterator[None]:
    """Count the input and fail it as a hang if it takes longer than HANG_SECONDS."""
    SEEN[target] += 1

    def fire(_signum: int, _frame: FrameType | None) -> None:
        raise HangError(f"{target}: no answer within {HANG_SECONDS}s")

    previous = signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_REAL, HANG_SECONDS)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def one_line(message: str) -> None:
    assert "\n" not in message
    assert "\r" not in message


# -- strategies: real inputs, their pieces, and the shapes that broke the tool -----------------

DIGITS = st.sampled_from(["0", "9", "²", "\uff15", "\u0663", "9" * 5000, "-1", "1e9", "0x10", " ", ""])
NUMBERISH = st.lists(st.one_of(DIGITS, st.sampled_from([".", "..", "\n", "\t", "\x00"])), max_size=8).map(
    "".join
)
TEXT = st.one_of(
    st.text(max_size=60), NUMBERISH, st.sampled_from(["535.129.03", "35.3.1", "12.8", "3.10.12", "9.0"])
)
RECORDINGS = [p for p in NVIDIA.iterdir() if p.suffix in {".xml", ".csv", ".txt"}]


@st.composite
def mutated(draw: st.DrawFn, texts: list[str]) -> str:
    """A real text with a few splices: cut, repeated, or a nasty fragment put in."""
    text = draw(st.sampled_from(texts))
    for _ in range(draw(st.integers(0, 4))):
        at = draw(st.integers(0, len(text)))
        piece = draw(
            st.one_of(
                NUMBERISH,
                st.text(max_size=20),
                st.sampled_from(
                    ["<gpu>", "</gpu>", "<!DOCTYPE x [<!ENTITY a 'aa'>]>&a;", '"', ",", "\n", "x" * 140_000]
                ),
            )
        )
        cut = draw(st.integers(0, 50))
        text = text[:at] + piece + text[at + cut :]
    return text


RECORDED_TEXTS = [p.read_text(encoding="utf-8", errors="replace") for p in RECORDINGS]
JSON_LEAF = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), TEXT)
JSON = st.recursive(
    JSON_LEAF,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(TEXT, inner, max_size=4)),
    max_leaves=20,
)


# -- number and version parsers ------------------------------------------------------------


@given(TEXT)
def test_fuzz_version_parsers(text: str) -> None:
    with watchdog("versions: driver, minor, python, count"):
        for parse in (
            DriverVersion.parse,
            lambda t: parse_minor(t, "compute capability"),
            parse_python,
            lambda t: parse_count(t, "GPU count", 4096),
        ):
            try:
                parse(text)
            except BadInputError as exc:
                one_line(str(exc))


# -- nvidia-smi, NVML and PCI ids ----------------------------------------------------------


@given(st.one_of(mutated(RECORDED_TEXTS), st.text(max_size=300)))
def test_fuzz_nvidia_smi_parsers(text: str) -> None:
    with watchdog("nvidia-smi: XML, CSV, banner"):
        for reading in (parse_smi_xml(text), parse_query_csv(text)):
            assert reading is None or all(g.name is not None for g in reading.gpus)
        parse_banner(text)


@given(
    JSON,
    st.dictionaries(
        st.sampled_from(
            [
                "index",
                "name",
                "uuid",
                "cuda_compute_capability",
                "memory_total_bytes",
                "memory_free_bytes",
                "processes",
            ]
        ),
        JSON,
    ),
)
def test_fuzz_nvml_reading(top: object, device: dict[str, object]) -> None:
    with watchdog("nvml child JSON"):
        data = top if isinstance(top, dict) else {"driver_version": "580.65.06", "devices": [device]}
        parse_nvml(data)


@given(st.one_of(TEXT, st.text(alphabet="0123456789abcdefABCDEFx ", max_size=12)), TEXT)
def test_fuzz_gpu_identity(pci: str, name: str) -> None:
    table = load_gpu_table()
    with watchdog("gpu identity: pci id, product name"):
        found = table.identify(name, pci_device_id(pci))
        assert found is None or found.compute_capability in {
            c.compute_capability for c in table.facts.chips.values()
        } | {n.compute_capability for n in table.facts.names}


# -- files: host JSON and matrix YAML ------------------------------------------------------

HOST_JSON = host_facts(driver="570.124.06", gpus=(("NVIDIA H100 80GB HBM3", "9.0"),)).to_json()
YAML_PIECES = st.sampled_from(
    [
        "&a [1,2]",
        "*a",
        "? *a\n: 1",
        "!!python/object:os.system",
        "[" * 70,
        "9" * 5000,
        "\x00",
        "\t",
        ": :",
        "- - -",
        "'\n",
    ]
)
MATRIX_TEXT = (FIXTURES / "tiny-matrix/verl.yaml").read_text(encoding="utf-8")


@given(
    st.one_of(
        mutated([HOST_JSON]), JSON.map(json.dumps), st.binary(max_size=200).map(lambda b: b.decode("latin-1"))
    )
)
@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_fuzz_host_file(tmp_path: Path, text: str) -> None:
    path = tmp_path / "node.json"
    path.write_text(text, encoding="utf-8", errors="surrogateescape")
    with watchdog("host file (plan --host)"):
        try:
            load_host_file(path)
        except BadInputError as exc:
            one_line(str(exc))


@st.composite
def yaml_text(draw: st.DrawFn) -> str:
    text = MATRIX_TEXT
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(text)))
        text = text[:at] + draw(st.one_of(YAML_PIECES, TEXT)) + text[at + draw(st.integers(0, 30)) :]
    return text


@given(st.one_of(yaml_text(), st.text(max_size=200)))
@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_fuzz_matrix_file(tmp_path: Path, text: str) -> None:
    path = tmp_path / "verl.yaml"
    path.write_text(text, encoding="utf-8", errors="surrogateescape")
    with watchdog("matrix file (matrix validate, --matrix)"):
        try:
            read_yaml(path)
        except YamlError as exc:
            one_line(str(exc))
        try:
            problems, _ = check(path)
        except BadInputError as exc:  # a row's bad driver string: `matrix validate` exits 2 with it
            problems = [str(exc)]
        for problem in problems:
            one_line(problem)


# -- the CLI boundary: flags and VERL_SETUP_* variables ------------------------------------

FLAGS = ["--driver", "--sm", "--python", "--gpu", "--gpu-count", "--verl", "--engine", "--policy", "--row"]
ENV = [
    "VERL_SETUP_DRIVER",
    "VERL_SETUP_SM",
    "VERL_SETUP_PYTHON",
    "VERL_SETUP_GPU",
    "VERL_SETUP_GPU_COUNT",
    "VERL_SETUP_ARCH",
    "VERL_SETUP_GLIBC",
    "VERL_SETUP_VERL",
    "VERL_SETUP_ENGINE",
    "VERL_SETUP_POLICY",
]
VALUE = TEXT.filter(lambda v: "\x00" not in v and not v.startswith("-"))
# `--opt=VALUE` carries any value, a leading dash included; Python 3.10-3.12 turn `--opt=--` into [].
EQUALS_VALUE = st.one_of(TEXT, st.sampled_from(["--", "-", "-x", "--help", "=", "--driver"])).filter(
    lambda v: "\x00" not in v
)


@st.composite
def flag_words(draw: st.DrawFn, names: list[str]) -> list[str]:
    """Flags as a user types them: `--opt VALUE` (two words) or `--opt=VALUE` (one)."""
    words: list[str] = []
    for _ in range(draw(st.integers(0, 4))):
        name = draw(st.sampled_from(names))
        if draw(st.booleans()):
            words.append(f"{name}={draw(EQUALS_VALUE)}")
        else:
            words += [name, draw(VALUE)]
    return words


@given(flag_words(FLAGS), st.dictionaries(st.sampled_from(ENV), VALUE, max_size=3))
@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_fuzz_plan_flags_and_environment(tmp_path: Path, flags: list[str], env: dict[str, str]) -> None:
    # A host file stands in for detection (an empty --driver means "not given"): no subprocess.
    host = tmp_path / "node.json"
    host.write_text(HOST_JSON, encoding="utf-8")
    argv = ["plan", "--driver", "570.124.06", "--sm", "9.0", *flags]
    with pytest.MonkeyPatch.context() as patch, watchdog("plan flags and VERL_SETUP_* variables"):
        patch.setenv("VERL_SETUP_HOST", str(host))
        for name, value in env.items():
            patch.setenv(name, value)
        result = run_cli(*argv)
    assert result.code in (0, 2, 3), result.err  # 1 would be a crash
    assert "Traceback" not in result.err
    assert len(result.err.splitlines()) == (0 if result.code == 0 else 1), result.err


# -- render: every value option, and hostile rows files -------------------------------------

RENDER_FLAGS = [
    "--base-image", "--hf-home", "--iface", "--image", "--job", "--nodes", "--head-ip", "--ray-port",
    "--dashboard-port", "--venv", "--namespace", "--gpus-per-node", "--build", "--without",
]  # fmt: skip


@given(
    flag_words(RENDER_FLAGS),
    st.sampled_from(["venv", "docker", "env", "ray", "slurm", "kuberay", "uv-project"]),
)
@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_fuzz_render_flags(tmp_path: Path, flags: list[str], target: str) -> None:
    host = tmp_path / "node.json"
    host.write_text(HOST_JSON, encoding="utf-8")
    argv = ["render", target, "--dry-run", "--out", str(tmp_path / "out"), "--host", str(host), *flags]
    with watchdog("render flags (--opt VALUE and --opt=VALUE)"):
        result = run_cli(*argv)
    assert result.code in (0, 2, 3, 4), result.err  # 4: a package built against torch needs a choice
    # render repeats plan's warnings (issue 32) and uv-project's progress lines ("[   0.0s] ...");
    # anything else on stderr is the one error line.
    other = [
        line
        for line in result.err.splitlines()
        if not line.startswith("verl-setup: warning: ") and not re.match(r"\[\s*[\d.]+s\] ", line)
    ]
    assert len(other) == (0 if result.code == 0 else 1), result.err


HOSTILE = st.sampled_from(
    ["$(touch X)", "`touch X`", "\n", "'", '"', "\\", ";", " ", "\r", "${X}", "{{ x }}", "%"]
)
ROWS_DATA = read_yaml(Path(__file__).resolve().parents[2] / "installer/verl_setup/../../matrices/verl.yaml")[
    0
]


def _strings(data: object, out: list[tuple[Any, Any]]) -> list[tuple[Any, Any]]:
    """(container, key) of every string value and every mapping key, in document order."""
    if isinstance(data, dict):
        for key, value in data.items():
            out.append((data, key))
            _strings(value, out)
    elif isinstance(data, list):
        for index, value in enumerate(data):
            if isinstance(value, str):
                out.append((data, index))
            _strings(value, out)
    return out


@st.composite
def hostile_rows(draw: st.DrawFn) -> str:
    """The bundled rows file cut to the CPU row, with shell and YAML syntax spliced into a few of
    its strings (values or keys)."""
    data = json.loads(json.dumps(ROWS_DATA))
    data["rows"] = [r for r in data["rows"] if r["id"] == "cpu"]
    places = _strings(data, [])
    # Prose (evidence, reasons, notes: values with a space) is what the loader lets through to the
    # templates; half the files get their splices there only, so that many load and are rendered.
    prose = [(c, k) for c, k in places if isinstance(c, dict) and " " in str(c.get(k, ""))]
    targets = prose if draw(st.booleans()) else places
    for _ in range(draw(st.integers(1, 6))):
        container, key = draw(st.sampled_from(targets))
        payload = "".join(draw(st.lists(HOSTILE, min_size=1, max_size=3)))
        if targets is places and isinstance(container, dict) and draw(st.booleans()) and key in container:
            container[str(key) + payload] = container.pop(key)
        elif isinstance(container[key] if isinstance(container, list) else container.get(key), str):
            container[key] += payload
    return json.dumps(data, indent=1)


@given(hostile_rows())
@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_fuzz_hostile_rows_file(tmp_path: Path, text: str) -> None:
    from verl_setup.plan.select import select  # noqa: PLC0415
    from verl_setup.plan.target import Request, build_target  # noqa: PLC0415
    from verl_setup.render.templates import TARGETS, RenderOptions, render  # noqa: PLC0415

    path = tmp_path / "verl.yaml"
    path.write_text(text, encoding="utf-8")
    machine = host_facts()
    with watchdog("hostile rows file (matrix validate, render every target)"):
        problems, matrix = check(path)
        for problem in problems:
            one_line(problem)
        event("refused by the loader" if matrix is None else "loaded, then rendered")
        if matrix is None:
            return
        try:
            target = build_target(
                Request(no_gpu=True),
                env={},
                rules=matrix.cuda,
                detect=lambda: machine,
                load_host=lambda _p: machine,
            )
            files = render(select(target, matrix), RenderOptions(targets=tuple(TARGETS), job="python3 -m x"))
        except BadInputError as exc:
            one_line(str(exc))
            return
    assert {f.name for f in files} >= {"setup-venv.sh", "Dockerfile", "pyproject.toml"}
    project = tomllib.loads(next(f.content for f in files if f.name == "pyproject.toml"))
    assert sorted(project) == ["project", "tool"]  # hostile prose stays in comments and strings
