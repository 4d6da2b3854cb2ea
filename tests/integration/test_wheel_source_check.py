"""`matrix check` of wheel sources against a stand-in of verl's wheelhouse on 127.0.0.1.

The stand-in has the wheelhouse's layout (one PEP 503 index per CUDA/torch world,
`cu130/torch2.11/simple/<project>/index.html`, links with `#sha256=`, no torch in the file
names) and three of the changes audit 2026-12-c's finding E1 says can happen upstream: the torch
2.11 world emptied by a torch bump, a file rebuilt under the same name (its sha256 changes), and
a world that gained aarch64 builds. The rows are test_matrix_refresh's (resolved against its own
index on 127.0.0.1); only the wheel source is new.
"""

from __future__ import annotations

import functools
import hashlib
import http.server
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.integration.local_index import LocalIndex, build_wheel
from tests.integration.test_matrix_refresh import ROW, env_for, index, run_json  # noqa: F401  # index: a fixture

SOURCE = """\
wheel_sources:
  - id: stand-in-wheelhouse
    kind: index
    url: "@BASE@/{cuda_tag}/torch{torch_minor}/simple/"
    torch_from: index-path
    trust: upstream
    serves:
      - packages: {flash-attn: ["2.8.3"], transformer-engine: ["2.16.1"]}
        torch: ["2.11"]
        cuda: ["13.0"]
        python: ["3.12"]
        arch: [x86_64]
        glibc: "2.39"
      - packages: {flash-attn: ["2.8.3"], transformer-engine: ["2.16.1"]}
        torch: ["2.13"]
        cuda: ["13.0"]
        python: ["3.12"]
        arch: [x86_64]
        glibc: "2.39"
    evidence: "test fixture: a stand-in of verl-project/verl-wheelhouse's layout"
"""

PACKAGES = {"flash-attn": "2.8.3", "transformer-engine": "2.16.1"}


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *_args: object) -> None:
        pass


class Wheelhouse:
    """The stand-in's files under root, served at base: put, replace or remove a world's wheels."""

    def __init__(self, root: Path, base: str) -> None:
        self.root, self.base = root, base
        self.built = root / "built"
        self.built.mkdir(parents=True)

    def put(self, world: str, name: str, version: str, *, arch: str = "x86_64", body: str = "") -> None:
        """A wheel for cp312 on `arch` in the world ("cu130/torch2.11"), listed on its project page."""
        module = name.replace("-", "_")
        filename = f"{module}-{version}-cp312-cp312-linux_{arch}.whl"
        wheel = build_wheel(
            self.built,
            name=name,
            version=version,
            files={f"{module}/__init__.py": f"# {world} {body}\n"},
            requires=(),
            scripts={},
            filename=filename,
            tag=f"cp312-cp312-linux_{arch}",
            headers=(),
        )
        assets = self.root / world / "releases"
        assets.mkdir(parents=True, exist_ok=True)
        shutil.copy(wheel, assets / filename)
        self._page(world, name)

    def empty(self, world: str) -> None:
        shutil.rmtree(self.root / world)

    def _page(self, world: str, name: str) -> None:
        links = "".join(
            f'<a href="{self.base}/{world}/releases/{w.name}#sha256={_sha256(w)}">{w.name}</a><br/>\n'
            for w in sorted((self.root / world / "releases").glob(f"{name.replace('-', '_')}-*.whl"))
        )
        page = self.root / world / "simple" / name
        page.mkdir(parents=True, exist_ok=True)
        (page / "index.html").write_text(f"<!DOCTYPE html>\n<html><body>\n{links}</body></html>\n")


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def wheelhouse(tmp_path: Path) -> Iterator[Wheelhouse]:
    root = tmp_path / "wheelhouse"
    root.mkdir()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(root)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    house = Wheelhouse(root, f"http://127.0.0.1:{server.server_address[1]}")
    for world in ("cu130/torch2.11", "cu130/torch2.13"):
        for name, version in PACKAGES.items():
            house.put(world, name, version)
    try:
        yield house
    finally:
        server.shutdown()
        server.server_close()


def source_check(matrix: Path, env: dict[str, str], code: int, *flags: str) -> dict[str, Any]:
    data = run_json("matrix", "check", "--matrix", str(matrix), *flags, env=env, code=code)
    (source,) = data["wheel_sources"]
    return dict(source)


def by_world(source: dict[str, Any]) -> dict[tuple[str, str, str], str]:
    return {(w["world"], w["package"], w["arch"]): w["status"] for w in source["wheels"]}


def test_a_wheel_source_is_checked_like_rows_emptied_world_changed_file_gained_arch(
    index: LocalIndex,  # noqa: F811  # the fixture imported above
    wheelhouse: Wheelhouse,
    tmp_path: Path,
) -> None:
    matrix = tmp_path / "m" / "verl.yaml"
    matrix.parent.mkdir()
    matrix.write_text(ROW.replace("rows:\n", SOURCE.replace("@BASE@", wheelhouse.base) + "rows:\n", 1))
    env = env_for(index, tmp_path)

    first = source_check(matrix, env, 0, "--record")
    assert set(by_world(first).values()) == {"present"}
    assert len(first["wheels"]) == 4
    seen = yaml.safe_load((matrix.parent / "wheel-sources-seen.yaml").read_text())
    checked = seen["sources"]["stand-in-wheelhouse"]["checked"]
    key = "cu130/torch2.11 flash-attn 2.8.3 cp312 x86_64"
    assert seen["sources"]["stand-in-wheelhouse"]["wheels"][key]["last_seen"] == checked

    # A world that gained aarch64: news, not drift.
    wheelhouse.put("cu130/torch2.13", "flash-attn", "2.8.3", arch="aarch64")
    gained = source_check(matrix, env, 0)
    assert by_world(gained)[("cu130/torch2.13", "flash-attn", "aarch64")] == "unlisted"
    assert gained["drifted"] is False

    # The same file name rebuilt: its sha256 changed, which is drift (exit 5).
    wheelhouse.put("cu130/torch2.13", "transformer-engine", "2.16.1", body="rebuilt")
    changed = source_check(matrix, env, 5)
    (moved,) = [w for w in changed["wheels"] if w["status"] == "changed"]
    assert moved["file"] == "transformer_engine-2.16.1-cp312-cp312-linux_x86_64.whl"
    assert moved["was_sha256"] != moved["sha256"]

    # The torch 2.11 world emptied by a torch bump: each wheel missing, with its last-seen date.
    wheelhouse.empty("cu130/torch2.11")
    result = cli_json(matrix, env)
    (source,) = result["data"]["wheel_sources"]
    assert source["empty_worlds"] == ["cu130/torch2.11"]
    missing = [w for w in source["wheels"] if w["status"] == "missing"]
    assert {(w["source"], w["world"], w["package"], w["last_seen"]) for w in missing} == {
        ("stand-in-wheelhouse", "cu130/torch2.11", "flash-attn", checked),
        ("stand-in-wheelhouse", "cu130/torch2.11", "transformer-engine", checked),
    }
    assert result["data"]["wheel_sources_drifted"] == ["stand-in-wheelhouse"]
    assert (
        "wheel sources no longer hold what the matrix promises: stand-in-wheelhouse"
        in result["error"]["message"]
    )

    # --record writes what it saw: the missing wheels keep the date they were last seen.
    cli_json(matrix, env, "--record")
    seen = yaml.safe_load((matrix.parent / "wheel-sources-seen.yaml").read_text())
    assert seen["sources"]["stand-in-wheelhouse"]["wheels"][key] == {
        "status": "missing",
        "last_seen": checked,
    }


def cli_json(matrix: Path, env: dict[str, str], *flags: str) -> dict[str, Any]:
    from tests.integration.test_install import cli  # noqa: PLC0415

    result = cli("matrix", "check", "--matrix", str(matrix), "--json", *flags, env=env)
    assert result.returncode == 5, result.stderr
    import json  # noqa: PLC0415

    return dict(json.loads(result.stdout))
