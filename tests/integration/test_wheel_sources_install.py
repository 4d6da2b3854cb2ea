"""The whole stack from a wheel source, without a flag: a stand-in wheelhouse served from
127.0.0.1 (the real layout: simple/flash-attn/index.html linking ../../wheels/<file>#sha256=,
a manifest beside each wheel) holds a stand-in flash-attn 2.8.3 that is a real compiled torch
extension: the package `flash_attn` importing torch and a C++ module built with
torch.utils.cpp_extension against PyPI's torch 2.11.0 (tests/integration/torch_ext.py's). Configured with
VERL_SETUP_WHEEL_SOURCES, install takes it, the ABI check and the import probe pass. The same
package built against torch 2.6.0, served as verl's wheelhouse serves (no torch in its name, no
manifest), is refused by the ABI check in one line naming both torches, and nothing changes.

What is a stand-in: the verl and the wheelhouse; flash-attn's kernels (one function, not
flash-attn's CUDA code). What is real: torch 2.11.0 from the index, uv, the compiled extension,
its ELF symbols, the HTTP index, the install, verify and the ABI check."""

from __future__ import annotations

import functools
import http.server
import json
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.test_install import TINY, cli, leftovers, tiny_env
from tests.integration.torch_ext import build_extension_wheel, repack, torch_env
from verl_setup.util.wheelhouse import Manifest, SourceRef, Wheelhouse, sha256_of

pytestmark = [pytest.mark.network, pytest.mark.slow]

ROW = """
  - id: tiny-fa-real
    verl: {version: "0.0.2+tiny", extras: []}
    engine: {name: none, version: null}
    python: {supported: ["3.12"], recommended: "3.12.1"}
    torch: {version: "2.11.0", cuda: null, index: default}
    packages:
      flash-attn: "2.8.3"
      six: "1.17.0"
      idna: "3.10"
    requires:
      arch: [x86_64]
      glibc: "2.17"
      cuda: null
      driver: null
      compute_capability: null
      gpu: false
    evidence:
      verl: "test fixture: stand-in wheel from make_wheels.py"
      engine: "none: a tiny row"
      torch: "PyPI torch 2.11.0, the torch of verl 0.9.1's rows"
      python: "the pyenv 3.12.1 of the test machines"
      flash-attn: "test fixture: a compiled stand-in from a wheelhouse"
      six: "PyPI"
      idna: "PyPI"
      requires.glibc: "as the tiny rows"
"""

INIT = (
    "import torch  # noqa: F401  # as flash-attn's own: torch's libraries first\n"
    "from verl_abi_probe import scaled_add  # the compiled module (flash-attn's is flash_attn_2_cuda)\n"
)
OLD_LABEL = "0.1.0+cu12torch2.6cxx11abiFALSE"  # as test_abi builds it: one compile serves both tests


def flash_attn_wheel(torch: str) -> Path:
    """flash_attn-2.8.3-cp312-cp312-linux_x86_64.whl: the package `flash_attn` around a real
    torch extension compiled against PyPI's torch `torch` (torch_ext's, repacked; cached)."""
    built = build_extension_wheel(torch_env(torch), version=OLD_LABEL if torch == "2.6.0" else "0.1.0")
    files = {"flash_attn/__init__.py": INIT.encode()}
    return repack(
        built, "flash_attn-2.8.3-cp312-cp312-linux_x86_64.whl", files, name="flash-attn", version="2.8.3"
    )


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *_args: object) -> None:
        pass


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str, str]]:
    """The matrix with the row, and the URLs of two wheelhouses: one right, one for torch 2.6."""
    root = tmp_path_factory.mktemp("wheelhouses")
    good = flash_attn_wheel("2.11.0")
    house = Wheelhouse(root / "good")
    house.add(
        good,
        Manifest(
            name="flash-attn", version="2.8.3", torch="2.11.0", cuda="13.0", python="cp312", abi=True,
            arch_list=(), platform="linux_x86_64",
            source=SourceRef(name="flash-attn", version="2.8.3", sha256=None, url=None),
            sha256=sha256_of(good), built_at="2026-12-01T00:00:00Z", built_with={"compiler": "g++"},
        ),
    )  # fmt: skip
    bad = flash_attn_wheel("2.6.0")
    assert bad.name == good.name  # the trap: nothing in the name says which torch
    (root / "bad" / "wheels").mkdir(parents=True)
    (root / "bad" / "simple" / "flash-attn").mkdir(parents=True)
    shutil.copy(bad, root / "bad" / "wheels" / bad.name)
    link = f'<a href="../../wheels/{bad.name}#sha256={sha256_of(bad)}">{bad.name}</a>'
    (root / "bad" / "simple" / "flash-attn" / "index.html").write_text(f"<html><body>{link}</body></html>")
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(root)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    matrix = root / "matrix" / "verl.yaml"
    matrix.parent.mkdir()
    text = (TINY / "verl.yaml").read_text().replace("@BASE@", "http://127.0.0.1:9")
    matrix.write_text(text.replace("\nrows:\n", "\nrows:\n" + ROW, 1))
    base = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        yield matrix, f"{base}/good/simple/", f"{base}/bad/simple/"
    finally:
        server.shutdown()


def env_with(source: str) -> dict[str, str]:
    """The tiny matrix's environment with uv's own cache (torch 2.11.0 is hardlinked from it)."""
    env = tiny_env(VERL_SETUP_WHEEL_SOURCES=source)
    env.pop("UV_CACHE_DIR")
    return env


def test_the_whole_stack_installs_from_a_wheelhouse_without_a_flag_and_a_wrong_torch_is_refused(
    served: tuple[Path, str, str], tmp_path: Path
) -> None:
    matrix, good, bad = served
    prefix = tmp_path / "env"
    argv = ("install", "--matrix", str(matrix), "--row", "tiny-fa-real", "--prefix", str(prefix))
    result = cli(*argv, "--json", env=env_with(good), timeout=1800)
    assert result.returncode == 0, result.stderr
    record = json.loads((prefix / "verl-setup.json").read_text())
    taken = record["torch_extensions"]["flash-attn"]
    assert taken["mode"] == "wheel"
    assert taken["source"] == f"user {good}"
    assert taken["url"].endswith("/good/wheels/flash_attn-2.8.3-cp312-cp312-linux_x86_64.whl")
    assert "built for torch 2.11.0" in result.stderr
    assert "abi" in [s["step"] for s in json.loads(result.stdout)["data"]["steps"]]
    probe = {m["module"]: m["outcome"] for m in record["import_probe"]["modules"]}
    assert probe["flash_attn"] == "ok"  # imports torch, then the compiled module
    # The install's own verify ran the import probe; this one reads versions and the ABI again.
    verified = cli(
        "verify", "--prefix", str(prefix), "--no-import", "--json", env=env_with(good), timeout=900
    )
    assert verified.returncode == 0, verified.stdout + verified.stderr
    report = json.loads(verified.stdout)["data"]
    assert report["abi"]["ok"] is True
    assert any("verl_abi_probe" in path for path in report["abi"]["checked"])

    before = (prefix / "verl-setup.json").read_bytes()
    refused = cli(*argv, env=env_with(bad), timeout=1800)
    assert refused.returncode == 4
    errors = [line for line in refused.stderr.splitlines() if line.startswith("verl-setup: error:")]
    assert len(errors) == 1, refused.stderr
    # Both torches: the one it was built for (its pre-C++11 names: PyPI's torch before 2.7; the
    # wheel's name and its index say nothing) and the one installed.
    assert "(flash_attn 2.8.3) was built against a torch with the pre-C++11 ABI" in errors[0]
    assert "this environment has torch 2.11.0" in errors[0]
    assert "/bad/wheels/flash_attn-2.8.3-cp312-cp312-linux_x86_64.whl" in errors[0]
    assert "nothing was changed" in errors[0]
    assert (prefix / "verl-setup.json").read_bytes() == before
    assert leftovers(prefix) == []
