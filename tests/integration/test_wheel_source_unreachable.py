"""issue 32, item 1: a wheel source that cannot be reached is named as the cause, first, and costs
seconds. Stand-ins for verl's wheelhouse on 127.0.0.1: a port where nothing listens (refused at
once, as a DNS failure is), and a server that accepts the connection and never answers (a hung
index or proxy). Before the fix both said "flash-attn 2.8.3 has no prebuilt wheel ... in any enabled
source" and offered a 160-minute build; the hung one waited 20 s per read."""

from __future__ import annotations

import re
import shutil
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import run_cli

REPO = Path(__file__).resolve().parents[2]
H100 = ("--gpu", "H100", "--driver", "580.95.05")


def matrix_with_wheelhouse_at(tmp_path: Path, base: str) -> Path:
    """The bundled matrices, verl-wheelhouse's URL pointed at `base` (the same {cuda_tag}/torch path)."""
    folder = tmp_path / "matrices"
    shutil.copytree(REPO / "matrices", folder)
    rows = folder / "verl.yaml"
    text, n = re.subn(
        r'(- id: verl-wheelhouse\n(?:.*\n)*?\s+url: ")https://[^/"]+/verl-wheelhouse/',
        rf"\g<1>{base}/",
        rows.read_text(encoding="utf-8"),
        count=1,
    )
    assert n == 1
    rows.write_text(text, encoding="utf-8")
    return rows


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A server that accepts connections and never says a word."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield server.getsockname()[1]
    stop.set()
    thread.join()
    for conn in held:
        conn.close()
    server.close()


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def dry_run(tmp_path: Path, matrix: Path, *more: str) -> tuple[int, str, float]:
    started = time.monotonic()
    result = run_cli(
        "install", "--dry-run", "--matrix", str(matrix), *H100, "--prefix", str(tmp_path / "env"), *more
    )
    return result.code, result.err.splitlines()[-1], time.monotonic() - started


def test_a_refused_wheelhouse_is_named_as_the_cause_first(tmp_path: Path) -> None:
    port = closed_port()
    code, last, _ = dry_run(tmp_path, matrix_with_wheelhouse_at(tmp_path, f"http://127.0.0.1:{port}"))
    assert code == 4
    where = f"http://127.0.0.1:{port}/cu130/torch2.11/simple/"
    assert last.startswith(f"verl-setup: error: could not reach verl-wheelhouse ({where}: "), last
    assert "check the network or proxy" in last
    assert "--build flash-attn / --without flash-attn" in last
    assert "has no prebuilt wheel" not in last


def test_a_hung_wheelhouse_costs_seconds_not_a_long_wait(tmp_path: Path, silent_port: int) -> None:
    code, last, seconds = dry_run(
        tmp_path, matrix_with_wheelhouse_at(tmp_path, f"http://127.0.0.1:{silent_port}")
    )
    assert code == 4
    assert last.startswith("verl-setup: error: could not reach verl-wheelhouse (http://127.0.0.1:"), last
    assert "no answer in time" in last or "did not arrive in time" in last or "timed out" in last
    assert seconds < 15, seconds  # one bounded wait for the source, not one per page


def test_a_reachable_source_that_lacks_the_wheel_still_offers_the_build(tmp_path: Path) -> None:
    empty = tmp_path / "wheels"
    empty.mkdir()
    port = closed_port()
    matrix = matrix_with_wheelhouse_at(tmp_path, f"http://127.0.0.1:{port}")
    code, last, _ = dry_run(tmp_path, matrix, "--wheel-source", str(empty))
    assert code == 4
    # The unreachable source is still the cause named first; the answering one is listed after it.
    assert last.startswith("verl-setup: error: could not reach verl-wheelhouse"), last
    assert f"also user {empty}" in last
