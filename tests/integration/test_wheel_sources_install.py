"""The whole stack from a wheel source over HTTPS, without a flag: flash-attn, TransformerEngine and
apex from a stand-in of verl's wheelhouse served from 127.0.0.1 with TLS (a self-signed CA passed
as users pass one, SSL_CERT_FILE, read by the tool's index client and by uv alike), with the real
layout (one index per CUDA/torch world, `cu130/torch2.11/simple/<project>/index.html`, absolute
links to release assets with `#sha256=`, as verl-wheelhouse's ci/build_index.py writes them) and
file names (flash_attn-2.8.3-, transformer_engine-2.16.1-, apex-0.1-cp312-cp312-linux_x86_64.whl:
no torch in them; flash-attn with the manifest `wheelhouse build` writes beside it, the other two
without, as verl's wheelhouse serves them). The wheels are real compiled torch extensions
(torch_ext's C++ module built with torch.utils.cpp_extension and g++ against PyPI's torch), laid
out as the real packages: `flash_attn` importing the compiled module, `transformer_engine` with
`transformer_engine/pytorch/__init__.py` importing the top-level `transformer_engine_torch`, and
`apex` importing `amp_C`.

Configured with VERL_SETUP_WHEEL_SOURCES, `lock` pins the whole TransformerEngine wheel with its
sha256 in place of PyPI's three packages, `install` takes the three wheels, and the ABI check after
each, verify and the import probe pass; the modules import and run. The same TransformerEngine
built against torch 2.6.0, served the same way, is refused by the ABI check in one line naming
both torches, and nothing changes.

Stand-ins: the verl, the wheelhouse, the kernels (one function, not flash-attn's or TE's CUDA
code). Real: torch 2.11.0 from the index, uv, TLS, the compiled modules and their ELF symbols,
install, lock, verify, the ABI check.
"""

from __future__ import annotations

import functools
import hashlib
import http.server
import json
import shutil
import ssl
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.test_install import TINY, cli, leftovers, tiny_env
from tests.integration.torch_ext import build_extension_wheel, repack, torch_env
from verl_setup.util.wheelhouse import Manifest, SourceRef

pytestmark = [pytest.mark.network, pytest.mark.slow]

FA_WHEEL = "flash_attn-2.8.3-cp312-cp312-linux_x86_64.whl"
TE_WHEEL = "transformer_engine-2.16.1-cp312-cp312-linux_x86_64.whl"
APEX_WHEEL = "apex-0.1-cp312-cp312-linux_x86_64.whl"
WORLD = "cu130/torch2.11/simple"

EXTENSIONS = """
  transformer-engine-torch:
    source: "test fixture: as matrices/verl.yaml"
    build_requires: ["setuptools"]
    modules: ["transformer_engine", "transformer_engine_torch", "transformer_engine.pytorch"]
    companions: ["transformer-engine", "transformer-engine-cu13"]
    whole: transformer-engine
    without:
      "0.0": "the tiny verl runs without it (test fixture)"
  apex:
    build: "apex @ git+https://github.com/NVIDIA/apex.git"
    source: "test fixture: as matrices/verl.yaml"
    modules: ["apex", "amp_C"]
    without:
      "0.0": "the tiny verl runs without it (test fixture)"
"""

ROW = """
  - id: tiny-megatron-wheels
    verl: {version: "0.0.2+tiny", extras: []}
    engine: {name: none, version: null}
    python: {supported: ["3.12"], recommended: "3.12.1"}
    torch: {version: "2.11.0", cuda: null, index: default}
    packages:
      flash-attn: "2.8.3"
      transformer-engine: "2.16.1"
      transformer-engine-cu13: "2.16.1"
      transformer-engine-torch: "2.16.1"
      apex: "0.1"
      six: "1.17.0"
    requires:
      arch: [x86_64]
      glibc: "2.28"
      cuda: null
      driver: null
      compute_capability: null
      gpu: false
    evidence:
      verl: "test fixture: stand-in wheel from make_wheels.py"
      engine: "none: a tiny row"
      torch: "PyPI torch 2.11.0, the torch of verl 0.9.1's Megatron row"
      python: "the pyenv 3.12.1 of the test machines"
      flash-attn: "test fixture: a compiled stand-in from the wheelhouse"
      transformer-engine: "test fixture: as row verl0.9-vllm0.24.0-megatron"
      transformer-engine-cu13: "test fixture: as the Megatron row (replaced by the whole wheel)"
      transformer-engine-torch: "test fixture: a compiled stand-in from the wheelhouse"
      apex: "test fixture: a compiled stand-in from the wheelhouse"
      six: "PyPI"
      requires.glibc: "torch 2.11.0's wheels are manylinux_2_28 (a lock resolves for the row's glibc)"
"""

TE_FILES = {
    "transformer_engine/__init__.py": b'"""A stand-in of TransformerEngine."""\n',
    # As TransformerEngine's own: torch's libraries first, then the compiled module, as `tex`.
    "transformer_engine/pytorch/__init__.py": (
        b"import torch  # noqa: F401\nimport transformer_engine_torch as tex\n"
    ),
}
FA_FILES = {
    "flash_attn/__init__.py": (
        b"import torch  # noqa: F401  # as flash-attn's own: torch's libraries first\n"
        b"from verl_abi_probe import scaled_add  # the compiled module (flash-attn's is flash_attn_2_cuda)\n"
    )
}
APEX_FILES = {"apex/__init__.py": b"import torch  # noqa: F401\nimport amp_C  # apex's fused kernels\n"}


def fa_wheel() -> Path:
    built = build_extension_wheel(torch_env("2.11.0"), version="0.1.0")  # test_abi's: one compile
    return repack(built, FA_WHEEL, FA_FILES, name="flash-attn", version="2.8.3")


def manifest(wheel: Path) -> dict[str, object]:
    """What `wheelhouse build` writes beside a wheel it built (here: against torch 2.11.0)."""
    return Manifest(
        name="flash-attn", version="2.8.3", torch="2.11.0", cuda="13.0", python="cp312", abi=True,
        arch_list=(), platform="linux_x86_64",
        source=SourceRef(name="flash-attn", version="2.8.3", sha256=None, url=None),
        sha256=hashlib.sha256(wheel.read_bytes()).hexdigest(), built_at="2026-12-01T00:00:00Z",
        built_with={"compiler": "g++"},
    ).to_json()  # fmt: skip


def te_wheel(torch: str) -> Path:
    built = build_extension_wheel(torch_env(torch), name="transformer-engine-torch", version="2.16.1")
    return repack(built, TE_WHEEL, TE_FILES, name="transformer-engine", version="2.16.1")


def apex_wheel() -> Path:
    built = build_extension_wheel(torch_env("2.11.0"), name="amp-C", version="0.1")
    return repack(built, APEX_WHEEL, APEX_FILES, name="apex", version="0.1")


def tls_files(folder: Path) -> tuple[Path, Path, Path]:
    """A self-signed CA and a certificate for 127.0.0.1 it signed: (ca, cert, key)."""
    ca, ca_key, cert, key = (folder / n for n in ("ca.pem", "ca.key", "cert.pem", "cert.key"))
    ext = folder / "ext.cnf"
    ext.write_text("subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\n")
    for argv in (
        ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", ca_key, "-out", ca, "-days", "2",
         "-subj", "/CN=verl-setup test CA", "-addext", "basicConstraints=critical,CA:TRUE",
         "-addext", "keyUsage=critical,keyCertSign"],
        ["req", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", folder / "cert.csr",
         "-subj", "/CN=127.0.0.1"],
        ["x509", "-req", "-in", folder / "cert.csr", "-CA", ca, "-CAkey", ca_key, "-CAcreateserial",
         "-out", cert, "-days", "2", "-extfile", ext],
    ):  # fmt: skip
        subprocess.run(["openssl", *map(str, argv)], check=True, capture_output=True, timeout=60)
    return ca, cert, key


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *_args: object) -> None:
        pass


def world(root: Path, base: str, name: str, wheels: dict[str, Path]) -> str:
    """One wheelhouse world under root/name: project pages linking release assets by absolute URL."""
    assets = root / name / "releases"
    assets.mkdir(parents=True)
    for project, wheel in wheels.items():
        shutil.copy(wheel, assets / wheel.name)
        if project == "flash-attn":
            (assets / f"{wheel.name}.json").write_text(json.dumps(manifest(wheel)))
        sha = hashlib.sha256(wheel.read_bytes()).hexdigest()
        page = root / name / WORLD / project
        page.mkdir(parents=True)
        link = f'<a href="{base}/{name}/releases/{wheel.name}#sha256={sha}">{wheel.name}</a><br/>'
        (page / "index.html").write_text(f"<!DOCTYPE html>\n<html><body>\n{link}\n</body></html>\n")
    return f"{base}/{name}/{WORLD}/"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str, str, Path]]:
    """The matrix with the row; the HTTPS URLs of a right wheelhouse and of one whose
    TransformerEngine was built against torch 2.6.0; the CA file."""
    root = tmp_path_factory.mktemp("https-wheelhouse")
    ca, cert, key = tls_files(root)
    good, bad, apex, fa = te_wheel("2.11.0"), te_wheel("2.6.0"), apex_wheel(), fa_wheel()
    assert good.name == bad.name  # the trap: nothing in the name says which torch
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(root)))
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    base = f"https://127.0.0.1:{server.server_address[1]}"
    right = world(root, base, "good", {"flash-attn": fa, "transformer-engine": good, "apex": apex})
    wrong = world(root, base, "bad", {"flash-attn": fa, "transformer-engine": bad, "apex": apex})
    threading.Thread(target=server.serve_forever, daemon=True).start()
    matrix = root / "matrix" / "verl.yaml"
    matrix.parent.mkdir()
    text = (TINY / "verl.yaml").read_text().replace("@BASE@", "127.0.0.1:9")
    text = text.replace("\ntorch_extensions:\n", "\ntorch_extensions:\n" + EXTENSIONS, 1)
    matrix.write_text(text.replace("\nrows:\n", "\nrows:\n" + ROW, 1))
    try:
        yield matrix, right, wrong, ca
    finally:
        server.shutdown()


def env_with(source: str, ca: Path) -> dict[str, str]:
    """The tiny matrix's environment, uv's own cache (torch 2.11.0 hardlinked from it), the CA."""
    env = tiny_env(VERL_SETUP_WHEEL_SOURCES=source, SSL_CERT_FILE=str(ca))
    env.pop("UV_CACHE_DIR")
    return env


def test_the_whole_stack_installs_from_an_https_wheelhouse_without_a_flag_and_a_wrong_torch_is_refused(
    served: tuple[Path, str, str, Path], tmp_path: Path
) -> None:
    matrix, right, wrong, ca = served
    row = ("--matrix", str(matrix), "--row", "tiny-megatron-wheels")
    lock = tmp_path / "verl.lock"
    locked = cli("lock", *row, "--out", str(lock), env=env_with(right, ca), timeout=900)
    assert locked.returncode == 0, locked.stderr
    text = lock.read_text()
    assert "flash-attn: wheel 2.8.3" in text
    assert "transformer-engine-torch=wheel 2.16.1 as transformer-engine, apex=wheel 0.1" in text
    assert f"transformer-engine @ {right.removesuffix(WORLD + '/')}releases/{TE_WHEEL}" in text
    assert "transformer-engine-cu13" not in text  # the whole wheel replaces PyPI's three packages
    assert "transformer-engine-torch ==" not in text

    prefix = tmp_path / "envs" / "env"  # alone in its folder: leftovers() reads the folder
    prefix.parent.mkdir()
    argv = ("install", *row, "--prefix", str(prefix))
    result = cli(*argv, "--json", env=env_with(right, ca), timeout=1800)
    assert result.returncode == 0, result.stderr
    record = json.loads((prefix / "verl-setup.json").read_text())
    te = record["torch_extensions"]["transformer-engine-torch"]
    assert (te["mode"], te["source"], te["distribution"]) == ("wheel", f"user {right}", "transformer-engine")
    assert te["url"].endswith(f"/good/releases/{TE_WHEEL}")
    assert record["torch_extensions"]["apex"]["url"].endswith(f"/good/releases/{APEX_WHEEL}")
    assert record["torch_extensions"]["flash-attn"]["url"].endswith(f"/good/releases/{FA_WHEEL}")
    assert f"{FA_WHEEL} from user {right} (built for torch 2.11.0)" in result.stderr  # its manifest
    probe = {m["module"]: m["outcome"] for m in record["import_probe"]["modules"]}
    assert probe["flash_attn"] == "ok"  # imports torch, then the compiled module
    assert "transformer-engine-cu13" not in record["distributions"]
    assert record["distributions"]["transformer-engine"] == "2.16.1"
    steps = [s["step"] for s in json.loads(result.stdout)["data"]["steps"]]
    assert steps.count("abi") == 3  # after each compiled extension landed
    run = subprocess.run(
        [str(prefix / "bin/python"), "-c",
         "import torch, flash_attn, transformer_engine.pytorch as te, apex, amp_C\n"
         "print(te.tex.scaled_add(torch.ones(2), torch.ones(2), 2.0).tolist(), amp_C.scaled_add.__doc__)"],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert run.stdout.split("]")[0] == "[3.0, 3.0"
    verified = cli(
        "verify", "--prefix", str(prefix), "--no-import", "--json", env=env_with(right, ca), timeout=900
    )
    assert verified.returncode == 0, verified.stdout + verified.stderr
    abi = json.loads(verified.stdout)["data"]["abi"]
    assert abi["ok"] is True
    checked = {Path(p).name.split(".")[0] for p in abi["checked"]}
    assert checked >= {"verl_abi_probe", "transformer_engine_torch", "amp_C"}

    before = (prefix / "verl-setup.json").read_bytes()
    refused = cli(*argv, env=env_with(wrong, ca), timeout=1800)
    assert refused.returncode == 4
    errors = [line for line in refused.stderr.splitlines() if line.startswith("verl-setup: error:")]
    assert len(errors) == 1, refused.stderr
    print(errors[0])  # for the log of a -s run: the one line a user sees
    # Both torches: the one it was built for (its pre-C++11 names: PyPI's torch before 2.7; the
    # wheel's name and its index say nothing) and the one installed.
    assert "(transformer_engine 2.16.1) was built against a torch with the pre-C++11 ABI" in errors[0]
    assert "this environment has torch 2.11.0" in errors[0]
    assert f"/bad/releases/{TE_WHEEL}" in errors[0]
    assert "nothing was changed" in errors[0]
    assert (prefix / "verl-setup.json").read_bytes() == before
    assert leftovers(prefix) == []
