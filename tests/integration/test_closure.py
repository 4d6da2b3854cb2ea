"""Reproducible by default, against an index on 127.0.0.1 that moves on (tests/integration/local_index.py).

A row's closure is recorded (`matrix check --record`); then the index gains a newer release of a
transitive dependency. The default install keeps the recorded version, `--upgrade` takes the new one
and names it before installing, and a recorded version that is yanked stops the install in one line.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.integration.local_index import LocalIndex, serve
from tests.integration.test_install import cli

pytestmark = [pytest.mark.network, pytest.mark.slow]

ROW = """\
schema: 1
rows:
  - id: tiny-closure
    verl: {version: "1.0.0", extras: []}
    engine: {name: none, version: null}
    python: {supported: ["3.12"], recommended: "3.12.1"}
    torch: {version: "2.9.0", cuda: null, index: default}
    packages: {}
    requires:
      arch: [x86_64]
      glibc: "2.28"
      cuda: null
      driver: null
      compute_capability: null
      gpu: false
    evidence:
      verl: "test fixture: a stand-in verl that requires tokenizers>=0.21"
      engine: "test fixture"
      torch: "test fixture"
      python: "test fixture"
      requires.glibc: "test fixture"
"""


@pytest.fixture
def index(tmp_path: Path) -> Iterator[LocalIndex]:
    with serve(tmp_path / "index") as served:
        served.upload("tokenizers", "0.21.0", date="2026-01-01")
        served.upload("torch", "2.9.0", date="2026-01-10")
        served.upload("verl", "1.0.0", date="2026-02-01", requires=("tokenizers>=0.21",))
        yield served


@pytest.fixture
def env(index: LocalIndex, tmp_path: Path) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("VERL_SETUP_", "UV_", "PIP_"))}
    return {
        **base,
        "UV_DEFAULT_INDEX": index.url,
        "UV_NO_CONFIG": "1",
        "UV_CACHE_DIR": str(tmp_path / "uv-cache"),
        "UV_PYTHON_DOWNLOADS": "never",
        "VERL_SETUP_CACHE_DIR": str(tmp_path / "verl-setup-cache"),
    }


@pytest.fixture
def matrix(tmp_path: Path, env: dict[str, str]) -> Path:
    path = tmp_path / "m" / "verl.yaml"
    path.parent.mkdir()
    path.write_text(ROW)
    recorded = cli("matrix", "check", "--matrix", str(path), "--record", env=env)
    assert recorded.returncode == 0, recorded.stderr
    return path


def install(matrix: Path, prefix: Path, env: dict[str, str], *flags: str) -> subprocess.CompletedProcess[str]:
    return cli(
        "install",
        "--matrix",
        str(matrix),
        "--no-gpu",
        "--prefix",
        str(prefix),
        "--no-import",
        *flags,
        env=env,
    )


def versions(prefix: Path) -> dict[str, str]:
    return dict(json.loads((prefix / "verl-setup.json").read_text())["distributions"])


def verify_closure(prefix: Path, env: dict[str, str]) -> dict[str, object]:
    result = cli("verify", "--prefix", str(prefix), "--no-import", "--json", env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    return dict(json.loads(result.stdout)["data"]["closure"])


def test_the_recorded_closure_holds_until_upgrade_and_a_yanked_release_stops_the_install(
    index: LocalIndex, matrix: Path, env: dict[str, str], tmp_path: Path
) -> None:
    record = yaml.safe_load((matrix.parent / "resolved.yaml").read_text())["rows"]["tiny-closure"]
    assert record["pins"]["tokenizers"].startswith("0.21.0 ")
    assert record["as_of"] == "2026-02-01"  # the newest upload among its pins
    plan = cli("plan", "--matrix", str(matrix), "--no-gpu", env=env)
    assert f"closure    recorded {record['recorded']}, proven to -: 3 distributions held" in plan.stdout

    # The index moves on: a newer release of a transitive dependency.
    index.upload("tokenizers", "0.22.0", date="2026-04-01")

    held = install(matrix, tmp_path / "held", env)
    assert held.returncode == 0, held.stderr
    assert versions(tmp_path / "held")["tokenizers"] == "0.21.0"
    assert verify_closure(tmp_path / "held", env)["state"] == "matches"

    upgraded = install(matrix, tmp_path / "upgraded", env, "--upgrade")
    assert upgraded.returncode == 0, upgraded.stderr
    listed = upgraded.stderr.index("tokenizers 0.21.0 -> 0.22.0 (uploaded 2026-04-01)")
    assert listed < upgraded.stderr.index("] verl: ")  # named before anything is installed
    assert versions(tmp_path / "upgraded")["tokenizers"] == "0.22.0"
    state = verify_closure(tmp_path / "upgraded", env)
    assert state["state"] == "newer"
    assert state["moved"] == [{"name": "tokenizers", "closure": "0.21.0", "installed": "0.22.0"}]
    manifest = json.loads((tmp_path / "upgraded" / "verl-setup.json").read_text())
    assert manifest["closure"]["source"] == "upgraded"

    # The recorded release is yanked: the default install stops in one line, nothing is left.
    index.yank("tokenizers-0.21.0-py3-none-any.whl", "broken build")
    stopped = install(matrix, tmp_path / "stopped", env)
    assert stopped.returncode == 4, stopped.stderr
    last = stopped.stderr.strip().splitlines()[-1]
    assert "tokenizers 0.21.0 of the row's closure" in last
    assert "was yanked (broken build); the nearest release is 0.22.0" in last
    assert "--upgrade" in last
    assert not (tmp_path / "stopped").exists()
    staged = [p.name for p in tmp_path.iterdir() if p.name.startswith(".stopped")]
    assert staged in ([], [".stopped.verl-setup.lock"])  # no half-built environment, at most its lock
    # The environment installed before it still verifies.
    assert verify_closure(tmp_path / "held", env)["state"] == "matches"


def test_a_deleted_closure_release_stops_the_install_in_one_line(
    index: LocalIndex, matrix: Path, env: dict[str, str], tmp_path: Path
) -> None:
    # uv cannot resolve a pin the index no longer has; the failure names the release, not uv's trace.
    index.upload("tokenizers", "0.22.0", date="2026-04-01")
    index.delete("tokenizers-0.21.0-py3-none-any.whl")
    stopped = install(matrix, tmp_path / "stopped", env)
    assert stopped.returncode == 4, stopped.stderr
    last = stopped.stderr.strip().splitlines()[-1]
    assert "tokenizers 0.21.0 of the row's closure" in last
    assert "was deleted from the index; the nearest release is 0.22.0" in last
    assert not (tmp_path / "stopped").exists()


@pytest.mark.parametrize("on_a_terminal", [True, False], ids=["background-pass", "uv-warning"])
def test_the_watch_names_a_yanked_release_both_ways(
    index: LocalIndex, env: dict[str, str], on_a_terminal: bool
) -> None:
    """On a terminal uv's warnings are not ours to read, so the closure is read from the index in
    the background; captured, uv's own warning names the release and the index is asked about it only."""
    from verl_setup.environment.closure_moves import GoneWatch  # noqa: PLC0415
    from verl_setup.errors import InstallError  # noqa: PLC0415
    from verl_setup.matrix.closure import Closure  # noqa: PLC0415
    from verl_setup.util.uvbin import find_uv  # noqa: PLC0415

    index.upload("tokenizers", "0.22.0", date="2026-04-01")
    index.yank("tokenizers-0.21.0-py3-none-any.whl", "broken build")
    pins = (("tokenizers", "0.21.0"), ("verl", "1.0.0"))
    closure = Closure(
        row="tiny-closure", target="3.12 x86_64", source="recorded", recorded="2026-02-02", pins=pins
    )
    watch = GoneWatch(closure, find_uv(), env, watch=on_a_terminal)
    uv_said = "" if on_a_terminal else 'warning: `tokenizers==0.21.0` is yanked (reason: "broken build")\n'
    if on_a_terminal:
        watch.after_step(uv_said)
        with pytest.raises(
            InstallError, match=r"tokenizers 0\.21\.0 of the row's closure .* was yanked \(broken"
        ):
            watch.finish()
    else:
        with pytest.raises(InstallError, match=r"the nearest release is 0\.22\.0"):
            watch.after_step(uv_said)
    # A pin that is not the closure's, or a clean step, stops nothing.
    quiet = GoneWatch(closure, find_uv(), env, watch=False)
    quiet.after_step('warning: `other==1.0` is yanked (reason: "x")\n')
    quiet.finish()
