"""Shared test helpers: fixture paths, a host-facts builder, and a CLI runner."""

from __future__ import annotations

import io
import json
import signal
from collections.abc import Callable, Iterator
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.contract import valid
from verl_setup.cli import main
from verl_setup.host.facts import Container, Gpu, HostFacts, NvidiaDriver, OsFacts

# A job started in the background by a script (`cmd &`, nohup) begins with SIGINT ignored, and every
# child inherits that: the tests' Ctrl-C would then never land (the interrupted-install tests pass
# vacuously, their install having finished; the Ctrl-C-during-Popen test fails). The tests send
# SIGINT as a terminal does, to programs that did not choose to ignore it; a Python handler is reset
# to the default on exec, so the children start as they would under a terminal.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

FIXTURES = Path(__file__).parent / "fixtures"
NVIDIA = FIXTURES / "nvidia"


def host(
    *,
    driver: str | None = None,
    gpus: tuple[tuple[str, str | None], ...] = (),
    glibc: str = "2.35",
    arch: str = "x86_64",
) -> HostFacts:
    """A HostFacts as detection would produce it for such a machine."""
    return HostFacts(
        os=OsFacts(
            distro="ubuntu",
            distro_version="22.04",
            kernel="5.15.0",
            glibc=glibc,
            arch=arch,
            source="test",
        ),
        container=Container(kind="none", evidence="test"),
        pythons=(),
        nvidia=None
        if driver is None
        else NvidiaDriver(version=driver, source="procfs /proc/driver/nvidia/version"),
        gpus=tuple(
            Gpu(
                index=i,
                name=name,
                uuid=f"GPU-{i}",
                compute_capability=cc,
                memory_total_mib=81559,
                memory_free_mib=81000,
                source="nvidia-smi -q -x",
            )
            for i, (name, cc) in enumerate(gpus)
        ),
        cuda_toolkits=(),
        tools=(),
    )


@dataclass
class CliResult:
    """Exit code and captured streams of one CLI run."""

    code: int
    out: str
    err: str


def json_data(stdout: str) -> dict[str, Any]:
    """The `data` of a --json envelope (output.py), validated against its published schema."""
    doc = valid(json.loads(stdout))
    assert isinstance(doc["data"], dict), doc
    return dict(doc["data"])


def run_cli(*argv: str) -> CliResult:
    """Run `verl-setup argv...` in-process through main() (exit codes and one-line errors)."""
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        try:
            code = main(list(argv))
        except SystemExit as exc:  # argparse usage errors
            code = int(exc.code or 0)
    return CliResult(code, out.getvalue(), err.getvalue())


@pytest.fixture
def host_file(tmp_path: Path) -> Callable[[HostFacts], Path]:
    """Write a HostFacts as a `detect --json` file and return its path."""

    def write(facts: HostFacts) -> Path:
        path = tmp_path / "node.json"
        path.write_text(facts.to_json(), encoding="utf-8")
        return path

    return write


@pytest.fixture(scope="session")
def parsed_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One parsed-matrix cache for the session, so tests' temporary matrices leave no entries in ~."""
    return tmp_path_factory.mktemp("parsed-matrix-cache")


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch, parsed_cache: Path) -> None:
    """Tests must not inherit VERL_SETUP_* settings from the developer's shell."""
    for name in [n for n in dict(__import__("os").environ) if n.startswith("VERL_SETUP_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("VERL_SETUP_CACHE_DIR", str(parsed_cache))


@pytest.fixture(autouse=True)
def _signals_not_left_blocked() -> Iterator[None]:
    """The runner blocks Ctrl-C and SIGTERM while it starts a tied child. A test that leaves them
    blocked breaks later tests in the same worker: every child it starts inherits the mask (a
    Popen that raised ValueError once left them so)."""
    yield
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, []) & {signal.SIGINT, signal.SIGTERM}
    if blocked:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, blocked)
        pytest.fail(f"this test left {sorted(signal.Signals(s).name for s in blocked)} blocked")
