"""`verl-setup bundle` with real uv and the real index, then `install --offline` with the network cut:
every index variable pointed at a closed port, UV_OFFLINE=1 and a fresh empty uv cache, so only the
bundle can serve a file. The tiny matrix for the faults (seconds); the cpu row for the real thing.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from tests.conftest import json_data
from tests.integration.test_flash_attn import WHEEL as FA_WHEEL
from tests.integration.test_flash_attn import WHEEL_HOST, served
from tests.integration.test_install import TINY_MATRIX, cli, leftovers, tiny_env
from verl_setup.environment.bundle import WHEELS
from verl_setup.output import schema_path

pytestmark = [pytest.mark.network, pytest.mark.slow]

CLOSED = "http://127.0.0.1:9/simple"  # the discard port: nothing listens there
__all__ = ["served"]  # the 127.0.0.1 release server, a fixture of test_flash_attn


def cut_off(cache: Path, **more: str) -> dict[str, str]:
    """The environment of a machine with no network: every index closed, uv offline, an empty cache."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VERL_SETUP_", "UV_", "PIP_"))}
    return {
        **env,
        "UV_INDEX_URL": CLOSED,
        "UV_DEFAULT_INDEX": CLOSED,
        "UV_EXTRA_INDEX_URL": CLOSED,
        "PIP_INDEX_URL": CLOSED,
        "UV_OFFLINE": "1",
        "UV_PYTHON_DOWNLOADS": "never",
        "UV_HTTP_RETRIES": "0",
        "UV_CACHE_DIR": str(cache),
        **more,
    }


def bundle_json(out: Path, *flags: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    """Make a bundle; its --json data, validated against the published schema."""
    result = cli("bundle", "--out", str(out), *flags, "--json", env=env or tiny_env(), timeout=1800)
    assert result.returncode == 0, result.stderr
    data = json_data(result.stdout)
    jsonschema.validate(data, json.loads(schema_path("bundle").read_text()))
    return data


@dataclass(frozen=True)
class Tiny:
    """The tiny-new row bundled, and the matrix it comes from."""

    bundle: Path
    matrix: Path


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Tiny:
    """tiny-new (stand-ins through find-links, six and idna from the index) with the sdist every
    real row has, antlr4-python3-runtime 4.9.3, so that the offline install builds it."""
    root = tmp_path_factory.mktemp("bundle")
    matrix = root / "matrix" / "verl.yaml"
    matrix.parent.mkdir()
    text = TINY_MATRIX.read_text()
    for anchor, added in (
        ('      idna: "3.10"\n', '      antlr4-python3-runtime: "4.9.3"\n'),
        (
            '      idna: "PyPI: pure-Python wheel, 70 KB"\n',
            '      antlr4-python3-runtime: "PyPI: an sdist only"\n',
        ),
        (
            "schema: 1\n",
            'sdists:\n  antlr4-python3-runtime: {versions: ["4.9.3"], reason: "an sdist to build"}\n',
        ),
    ):
        assert anchor in text
        text = text.replace(anchor, anchor + added, 1)
    matrix.write_text(text)
    data = bundle_json(root / "tiny", "--matrix", str(matrix), "--row", "tiny-new", "--python", "3.12.1")
    assert data["row"] == "tiny-new"
    return Tiny(bundle=root / "tiny", matrix=matrix)


def offline_install(bundle: Path, prefix: Path, env: dict[str, str], matrix: Path) -> tuple[int, str]:
    result = cli(
        "install", "--offline", str(bundle), "--matrix", str(matrix), "--prefix", str(prefix), env=env
    )
    return result.returncode, result.stderr


def test_a_bundle_installs_with_the_network_cut_and_verifies(tiny: Tiny, tmp_path: Path) -> None:
    manifest = json.loads((tiny.bundle / "bundle.json").read_text())
    names = sorted(Path(f["path"]).name for f in manifest["files"])
    setuptools = next(n for n in names if n.startswith("setuptools-"))  # antlr4's build backend
    assert names == [
        "antlr4-python3-runtime-4.9.3.tar.gz",
        "idna-3.10-py3-none-any.whl",
        setuptools,
        "six-1.17.0-py2.py3-none-any.whl",
        "torch-0.0.2+tiny-py3-none-any.whl",
        "verl-0.0.2+tiny-py3-none-any.whl",
    ]
    for f in manifest["files"]:
        assert hashlib.sha256((tiny.bundle / f["path"]).read_bytes()).hexdigest() == f["sha256"]
    assert manifest["lock"]["sha256"] == hashlib.sha256((tiny.bundle / "verl.lock").read_bytes()).hexdigest()
    assert "the target must provide Python 3.12.1" in manifest["python_build"]["note"]
    env = cut_off(tmp_path / "empty-cache")
    # The network really is cut: the same lock, installed without the bundle, cannot get a file.
    plain = cli("install", "--lock", str(tiny.bundle / "verl.lock"), "--matrix", str(tiny.matrix),
                "--prefix", str(tmp_path / "plain"), env=env)  # fmt: skip
    assert plain.returncode == 4, plain.stderr
    assert not (tmp_path / "plain").exists()
    code, err = offline_install(tiny.bundle, tmp_path / "env", env, tiny.matrix)
    assert code == 0, err
    verified = cli("verify", "--prefix", str(tmp_path / "env"), env=env)
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert "5 of 5 expected distributions match" in verified.stdout + verified.stderr
    recorded = json.loads((tmp_path / "env" / "verl-setup.json").read_text())
    assert recorded["row"]["id"] == "tiny-new"
    assert recorded["distributions"]["antlr4-python3-runtime"] == "4.9.3"  # built offline
    sync = next(r["argv"] for r in recorded["recipe"] if r["step"] == "lock")
    assert sync[-4:] == ["--offline", "--no-index", "--find-links", str(tiny.bundle / "wheels")]


def test_a_tampered_wheel_is_refused_in_one_line_and_nothing_changes(tiny: Tiny, tmp_path: Path) -> None:
    env = cut_off(tmp_path / "empty-cache")
    prefix = tmp_path / "project" / "env"
    assert offline_install(tiny.bundle, prefix, env, tiny.matrix)[0] == 0
    before = (prefix / "verl-setup.json").read_bytes()
    bad = tmp_path / "bad"
    shutil.copytree(tiny.bundle, bad)
    six = bad / "wheels" / "six-1.17.0-py2.py3-none-any.whl"
    six.write_bytes(six.read_bytes() + b"\0")
    code, err = offline_install(bad, prefix, env, tiny.matrix)
    assert code == 4
    last = err.strip().splitlines()[-1]
    assert last.startswith(f"verl-setup: error: {six}: sha256 ")
    assert last.endswith("(the file was altered or damaged in transit); nothing was changed")
    assert (prefix / "verl-setup.json").read_bytes() == before
    assert leftovers(prefix) == []
    # The manifest rewritten to match: the sealed lock's own hashes still refuse the file (uv).
    manifest = json.loads((bad / "bundle.json").read_text())
    for f in manifest["files"]:
        if f["path"].endswith(six.name):
            f["sha256"], f["size"] = hashlib.sha256(six.read_bytes()).hexdigest(), six.stat().st_size
    (bad / "bundle.json").write_text(json.dumps(manifest))
    code, err = offline_install(bad, prefix, env, tiny.matrix)
    assert code == 4
    assert "uv refused the lock: " in err.strip().splitlines()[-1]
    assert "Hash mismatch" in err.strip().splitlines()[-1]
    assert (prefix / "verl-setup.json").read_bytes() == before
    assert leftovers(prefix) == []


def test_a_wheel_the_bundle_lacks_or_does_not_list_is_named(tiny: Tiny, tmp_path: Path) -> None:
    env = cut_off(tmp_path / "empty-cache")
    bad = tmp_path / "bad"
    shutil.copytree(tiny.bundle, bad)
    (bad / "wheels" / "idna-3.10-py3-none-any.whl").unlink()
    code, err = offline_install(bad, tmp_path / "env", env, tiny.matrix)
    assert code == 4
    assert err.strip().splitlines()[-1] == (
        f"verl-setup: error: {bad}: wheels/idna-3.10-py3-none-any.whl is missing from the bundle; "
        "nothing was changed"
    )
    shutil.copy(tiny.bundle / "wheels" / "idna-3.10-py3-none-any.whl", bad / "wheels")
    (bad / "wheels" / "extra-1.0-py3-none-any.whl").write_bytes(b"not listed")
    code, err = offline_install(bad, tmp_path / "env", env, tiny.matrix)
    assert code == 4
    assert "extra-1.0-py3-none-any.whl is not in the bundle's manifest" in err.strip().splitlines()[-1]
    (bad / "bundle.json").unlink()  # what an interrupted bundle would leave: no manifest
    code, err = offline_install(bad, tmp_path / "env", env, tiny.matrix)
    assert code == 2
    assert "is not a bundle (no bundle.json" in err.strip().splitlines()[-1]
    assert not (tmp_path / "env").exists()


def test_a_failed_bundle_is_one_envelope_and_leaves_no_folder(tmp_path: Path) -> None:
    result = cli("bundle", "--out", str(tmp_path / "b"), "--lock", str(tmp_path / "none.lock"), "--json")
    assert result.returncode == 2
    doc = json.loads(result.stdout)
    jsonschema.validate(doc, json.loads(schema_path("envelope").read_text()))
    jsonschema.validate(doc["data"], json.loads(schema_path("bundle").read_text()))
    assert doc["error"]["message"] == f"cannot read lock {tmp_path / 'none.lock'}: No such file or directory"
    assert not (tmp_path / "b").exists()


def test_bundling_again_reuses_the_files_and_replaces_the_folder_whole(tiny: Tiny, tmp_path: Path) -> None:
    out = tmp_path / "again"
    shutil.copytree(tiny.bundle, out)
    (out / "stale-note.txt").write_text("from the old bundle")
    result = cli("bundle", "--out", str(out), "--lock", str(tiny.bundle / "verl.lock"), timeout=900)
    assert result.returncode == 0, result.stderr
    assert "5 of 5 files reused from the bundle already there" in result.stderr  # the lock's
    assert "1 of 1 files reused from the bundle already there" in result.stderr  # setuptools
    assert not (out / "stale-note.txt").exists()
    assert leftovers(out) == []  # no staging or parked folder left, only the flock file
    again = json.loads((out / "bundle.json").read_text())
    assert again["files"] == json.loads((tiny.bundle / "bundle.json").read_text())["files"]


def test_a_bundled_python_is_unpacked_where_uv_finds_it(tiny: Tiny, tmp_path: Path) -> None:
    """A uv-managed Python goes into the bundle and out again into the target's uv Python folder.

    Stand-in: no uv-managed Python can be downloaded here, so pyenv's 3.12.1 (hard-linked) under
    uv's folder name plays one; uv itself reports it as managed (`uv python find --managed-python`).
    """
    source = tmp_path / "uv-python"
    # Hard-linked, without what a venv never reads (its tests, the static library, caches): 62 MB.
    skip = shutil.ignore_patterns("test", "config-3.*", "site-packages", "__pycache__", "idlelib", "tkinter")
    shutil.copytree("/root/.pyenv/versions/3.12.1", source / "cpython-3.12.1-linux-x86_64-gnu",
                    symlinks=True, copy_function=os.link, ignore=skip)  # fmt: skip
    out = tmp_path / "bundle"
    lock = str(tiny.bundle / "verl.lock")
    data = bundle_json(out, "--lock", lock, env=tiny_env(UV_PYTHON_INSTALL_DIR=str(source)))
    assert data["python_build"]["path"] == "python/cpython-3.12.1-linux-x86_64-gnu.tar"
    assert data["python_build"]["role"] == "python"
    target = tmp_path / "target-uv-python"
    # No other 3.12 on the target: only PATH's system Python and an empty pyenv.
    env = cut_off(tmp_path / "empty-cache", UV_PYTHON_INSTALL_DIR=str(target), PATH="/usr/bin:/bin",
                  PYENV_ROOT=str(tmp_path / "no-pyenv"))  # fmt: skip
    code, err = offline_install(out, tmp_path / "env", env, tiny.matrix)
    assert code == 0, err
    assert (target / "cpython-3.12.1-linux-x86_64-gnu" / "bin" / "python3.12").exists()
    assert "python: 3.12.1 from uv-managed" in err
    home = (tmp_path / "env" / "pyvenv.cfg").read_text()
    assert str(target / "cpython-3.12.1-linux-x86_64-gnu") in home


@pytest.mark.serial  # ~10 GB at its peak (the bundle, and its install's empty uv cache): on its own
def test_the_cpu_row_bundles_and_installs_with_the_network_cut(tmp_path: Path) -> None:
    """The real thing: verl 0.9.1 + torch 2.11.0 (~3 GB of wheels). The bundle lives in tmp_path
    and goes with it (kept between runs it held 3 GB of CI's disk for nothing); the install has an
    empty uv cache, so every file comes out of the bundle."""
    out = tmp_path / "bundle-cpu"
    env = {k: v for k, v in os.environ.items() if not k.startswith("VERL_SETUP_")}
    env["UV_PYTHON_DOWNLOADS"] = "never"
    data = bundle_json(out, "--no-gpu", env=env)
    assert data["row"] == "cpu"
    assert any(Path(f["path"]).name.startswith("torch-2.11.0-") for f in data["files"])
    assert any(f["role"] == "build" for f in data["files"])  # antlr4's sdist builds with setuptools
    prefix = tmp_path / "cpu"
    cut = cut_off(tmp_path / "empty-cache")
    try:
        result = cli(
            "install", "--offline", str(out), "--prefix", str(prefix), "--no-import", env=cut, timeout=1800
        )
        assert result.returncode == 0, result.stderr
        # The import probe of this row runs in test_verify's cpu install (the same files, by sha256).
        verified = cli("verify", "--prefix", str(prefix), "--no-import", env=cut, timeout=900)
        assert verified.returncode == 0, verified.stdout + verified.stderr
        assert "162 of 162 expected distributions match" in verified.stdout + verified.stderr
    finally:
        for folder in (prefix, tmp_path / "empty-cache", out):
            shutil.rmtree(folder, ignore_errors=True)


def test_a_prebuilt_extension_wheel_from_a_wheel_source_is_bundled_and_installs_offline(
    served: tuple[Path, list[str]], tmp_path: Path
) -> None:
    """flash-attn's wheel URL in the lock (a stand-in served from 127.0.0.1, as a release asset)
    becomes a file of the bundle, and installs without the server being asked for anything."""
    matrix, requests = served
    out = tmp_path / "bundle"
    data = bundle_json(out, "--matrix", str(matrix), *WHEEL_HOST)
    assert f"{WHEELS}/{FA_WHEEL}" in {f["path"] for f in data["files"]}
    assert data["sync"] == {"path": "sync.txt"}
    assert "flash-attn==2.8.3+cu12torch2.8cxx11abitrue \\\n" in (out / "sync.txt").read_text()
    prefix, asked = tmp_path / "env", len(requests)
    argv = ["--offline", str(out), "--matrix", str(matrix), *WHEEL_HOST, "--prefix", str(prefix)]
    result = cli("install", *argv, env=cut_off(tmp_path / "empty-cache"))
    assert result.returncode == 0, result.stderr
    assert requests[asked:] == []
    assert json.loads((prefix / "verl-setup.json").read_text())["distributions"]["flash-attn"] == "2.8.3"
    # O1: one line appended to sync.txt, the file uv installs from, is refused before anything changes
    before = (prefix / "verl-setup.json").read_bytes()
    with (out / "sync.txt").open("a") as f:
        f.write(f"six==1.17.0 --hash=sha256:{'1' * 64}\n")
    tampered = cli("install", *argv, env=cut_off(tmp_path / "empty-cache"))
    assert tampered.returncode == 4, tampered.stderr
    assert "sync.txt" in tampered.stderr
    assert "nothing was changed" in tampered.stderr
    assert (prefix / "verl-setup.json").read_bytes() == before


def test_a_bundle_downloads_from_a_private_ca_https_server_with_ssl_cert_file(tmp_path: Path) -> None:
    """Issue 33: `bundle`'s own downloader trusts what uv trusts. The flash-attn release asset is
    served over HTTPS with a certificate from a CA of this test's own; SSL_CERT_FILE names it."""
    import functools  # noqa: PLC0415
    import http.server  # noqa: PLC0415
    import ssl  # noqa: PLC0415
    import threading  # noqa: PLC0415

    from tests.integration.test_install import TINY  # noqa: PLC0415
    from tests.integration.test_wheel_sources_install import tls_files  # noqa: PLC0415

    root = tmp_path / "release"
    (root / "v2.8.3").mkdir(parents=True)
    shutil.copy(TINY / "served" / FA_WHEEL, root / "v2.8.3" / FA_WHEEL)
    ca, cert, key = tls_files(tmp_path)
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    matrix = tmp_path / "matrix" / "verl.yaml"
    matrix.parent.mkdir()
    base = f"https://127.0.0.1:{server.server_address[1]}"
    matrix.write_text((TINY / "verl.yaml").read_text().replace("http://@BASE@", base))
    try:
        out = tmp_path / "bundle"
        data = bundle_json(out, "--matrix", str(matrix), *WHEEL_HOST, env=tiny_env(SSL_CERT_FILE=str(ca)))
        assert f"{WHEELS}/{FA_WHEEL}" in {f["path"] for f in data["files"]}
        got = hashlib.sha256((out / WHEELS / FA_WHEEL).read_bytes()).hexdigest()
        assert got == hashlib.sha256((TINY / "served" / FA_WHEEL).read_bytes()).hexdigest()
        # without the CA, the same bundle fails in one line naming the certificate
        refused = cli("bundle", "--out", str(tmp_path / "b2"), "--matrix", str(matrix), *WHEEL_HOST,
                      env=tiny_env(), timeout=600)  # fmt: skip
        assert refused.returncode == 4, refused.stderr
        assert "certificate" in refused.stderr.splitlines()[-1].lower()
    finally:
        server.shutdown()
