"""The offline bundle's parts without uv: which files uv's pylock.toml gives, the lock's wheel URLs
as find-links names, a bundle folder read back, and an interrupted or full-disk bundle leaving the
folder as it was. The whole flow with real uv is tests/integration/test_bundle.py."""

from __future__ import annotations

import errno
import hashlib
import json
import re
from pathlib import Path
from typing import Any

import pytest

from verl_setup.environment import bundle_make
from verl_setup.environment.bundle import read_bundle, sync_text
from verl_setup.environment.bundle_make import BundleJob, files_from_pylock, make_bundle
from verl_setup.environment.lock import render
from verl_setup.errors import BadInputError, InstallError, Stopped
from verl_setup.output import Progress

SIX_WHEEL = "4721f391ed90541fddacab5acf947aa0d3dc7d27b2e1e8eda2be8970586c3274"
SIX_SDIST = "ff70335d468e7eb6ec65b95b99d3a2836546063f63acc5171de367e834932a81"
# uv 0.13.9's `uv pip compile LOCK --no-deps --format pylock.toml` for the tiny-new lock (cut to six)
PYLOCK = f"""lock-version = "1.0"
created-by = "uv"
requires-python = ">=3.12.1"

[[packages]]
name = "six"
version = "1.17.0"
sdist = {{ url = "https://files.example/packages/94/e7/six-1.17.0.tar.gz", upload-time = 2024-12-04T17:35:28Z, size = 34031, hashes = {{ sha256 = "{SIX_SDIST}" }} }}
wheels = [{{ url = "https://files.example/packages/b7/ce/six-1.17.0-py2.py3-none-any.whl", upload-time = 2024-12-04T17:35:26Z, size = 11050, hashes = {{ sha256 = "{SIX_WHEEL}" }} }}]
"""  # noqa: E501  # uv's lines as written


def test_a_pins_wheel_is_taken_when_the_lock_names_its_hash() -> None:
    [taken] = files_from_pylock(PYLOCK, only={SIX_WHEEL, SIX_SDIST}, role="lock")
    assert (taken.name, taken.sha256, taken.size) == ("six-1.17.0-py2.py3-none-any.whl", SIX_WHEEL, 11050)


def test_the_sdist_is_taken_only_when_no_wheel_has_a_locked_hash() -> None:
    [taken] = files_from_pylock(PYLOCK, only={SIX_SDIST}, role="lock")
    assert taken.name == "six-1.17.0.tar.gz"


def test_a_package_whose_files_all_have_other_hashes_is_refused() -> None:
    with pytest.raises(InstallError, match=r"^six 1.17.0: none of the files the index serves"):
        files_from_pylock(PYLOCK, only={"0" * 64}, role="lock")


def test_a_wheel_url_pin_becomes_its_exact_version_for_find_links() -> None:
    body = (
        "flash-attn @ https://wheels.example/v2.8.3/flash_attn-2.8.3%2Bcu12torch2.8cxx11abiTRUE-cp312-cp312-"
        "linux_x86_64.whl \\\n    --hash=sha256:"
        + "a" * 64
        + "\nsix==1.17.0 \\\n    --hash=sha256:"
        + SIX_WHEEL
        + "\n"
    )
    assert sync_text(body) == (
        "flash-attn==2.8.3+cu12torch2.8cxx11abitrue \\\n    --hash=sha256:" + "a" * 64 + "\n"
        "six==1.17.0 \\\n    --hash=sha256:" + SIX_WHEEL + "\n"
    )
    assert sync_text("six==1.17.0 \\\n    --hash=sha256:" + SIX_WHEEL + "\n") is None


@pytest.mark.parametrize(
    ("manifest", "message"),
    [
        (None, "is not a bundle (no bundle.json"),
        ("{", "not a bundle manifest"),
        ('{"kind": "other"}', "not a verl-setup bundle manifest"),
        ('{"kind": "verl-setup-bundle", "schema": 9}', "bundle schema 9, this verl-setup reads 1"),
        ('{"kind": "verl-setup-bundle", "schema": 1, "row": "x", "files": [{"path": "x"}]}', "malformed"),
        (
            '{"kind": "verl-setup-bundle", "schema": 1, "row": "x", '
            '"files": [{"path": "../etc/passwd", "sha256": "0", "size": 1, "role": "lock"}]}',
            "a file outside the bundle (../etc/passwd)",
        ),
    ],
    ids=["no-manifest", "not-json", "other-kind", "newer-schema", "malformed-file", "escapes"],
)
def test_a_folder_that_is_not_a_usable_bundle_is_one_line(
    tmp_path: Path, manifest: str | None, message: str
) -> None:
    if manifest is not None:
        (tmp_path / "bundle.json").write_text(manifest)
    with pytest.raises(BadInputError, match=re.escape(message)) as caught:
        read_bundle(tmp_path)
    assert "\n" not in str(caught.value)


def _lock_text() -> str:
    fields = {
        "row": "tiny-new", "row-sha256": "0" * 64, "matrix": "verl.yaml", "matrix-sha256": "0" * 64,
        "python": "3.12.1", "platform": "x86_64-manylinux_2_17", "index-url": "default",
        "flash-attn": "none", "uv": "0.13.9",
    }  # fmt: skip
    return render(fields, f"six==1.17.0 \\\n    --hash=sha256:{SIX_WHEEL}\n")


def _old_bundle(out: Path) -> bytes:
    out.mkdir()
    doc = {"kind": "verl-setup-bundle", "schema": 1, "row": "old", "files": []}
    (out / "bundle.json").write_text(json.dumps(doc))
    return (out / "bundle.json").read_bytes()


@pytest.mark.parametrize(
    ("fault", "expected"),
    [
        (KeyboardInterrupt(), Stopped),
        (OSError(errno.ENOSPC, "No space left on device"), InstallError),
    ],
    ids=["ctrl-c", "full-disk"],
)
def test_an_interrupted_or_full_disk_bundle_leaves_the_folder_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fault: BaseException, expected: type[BaseException]
) -> None:
    out = tmp_path / "bundle"
    before = _old_bundle(out)
    monkeypatch.setattr(bundle_make, "_pylock", lambda *_a, **_k: PYLOCK)

    def broken_fetch(*_args: Any) -> None:
        (tmp_path / f".bundle.staging-{__import__('os').getpid()}" / "wheels" / ".six.whl.part").write_bytes(
            b"x"
        )
        raise fault

    monkeypatch.setattr(bundle_make, "fetch", broken_fetch)
    job = BundleJob(lock_text=_lock_text(), out=out, uv="uv", uv_env={})
    with pytest.raises(expected) as caught:
        make_bundle(job, Progress(quiet=True))
    assert "as it was" in str(caught.value)
    assert (out / "bundle.json").read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == [".bundle.verl-setup.lock", "bundle"]


def test_sha256_of_reads_in_blocks(tmp_path: Path) -> None:
    from verl_setup.util.wheelhouse import sha256_of  # noqa: PLC0415

    data = b"x" * (3 << 20) + b"tail"
    (tmp_path / "f").write_bytes(data)
    seen: list[int] = []
    assert sha256_of(tmp_path / "f", seen.append) == hashlib.sha256(data).hexdigest()
    assert sum(seen) == len(data)
    assert len(seen) == 4


def test_a_folder_that_is_not_a_bundle_is_never_replaced(tmp_path: Path) -> None:
    out = tmp_path / "project"
    out.mkdir()
    (out / "train.py").write_text("keep me")
    job = BundleJob(lock_text=_lock_text(), out=out, uv="uv", uv_env={})
    with pytest.raises(BadInputError, match="exists and is not a bundle"):
        make_bundle(job, Progress(quiet=True))
    assert (out / "train.py").read_text() == "keep me"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["project"]


FA_WHEEL = "flash_attn-2.8.3+cu12torch2.8cxx11abiTRUE-cp312-cp312-linux_x86_64.whl"


def _fa_bundle(root: Path, *, list_sync: bool = True) -> Path:
    """A bundle as `bundle` writes one for a lock with a wheel URL pin: lock, sync.txt, wheels/."""
    from verl_setup.environment.bundle import sync_text  # noqa: PLC0415
    from verl_setup.util.wheelhouse import sha256_of  # noqa: PLC0415

    (root / "wheels").mkdir(parents=True)
    wheel = root / "wheels" / FA_WHEEL
    wheel.write_bytes(b"wheel bytes")
    digest = hashlib.sha256(b"wheel bytes").hexdigest()
    fields = {
        "row": "tiny-fa-wheel", "row-sha256": "0" * 64, "matrix": "verl.yaml", "matrix-sha256": "0" * 64,
        "python": "3.12.1", "platform": "x86_64-manylinux_2_17", "index-url": "default",
        "flash-attn": "wheel", "uv": "0.13.9",
    }  # fmt: skip
    lock = render(fields, f"flash-attn @ https://w.example/{FA_WHEEL} \\\n    --hash=sha256:{digest}\n")
    (root / "verl.lock").write_text(lock)
    sync = sync_text(lock)
    assert sync is not None
    (root / "sync.txt").write_text(sync)
    files = [{"path": f"wheels/{FA_WHEEL}", "sha256": digest, "size": 11, "role": "lock"}]
    if list_sync:
        files.append({"path": "sync.txt", "sha256": sha256_of(root / "sync.txt"), "size": 1, "role": "lock"})
    doc = {
        "kind": "verl-setup-bundle", "schema": 1, "row": "tiny-fa-wheel",
        "lock": {"path": "verl.lock", "sha256": sha256_of(root / "verl.lock")},
        "sync": {"path": "sync.txt"}, "python_build": {"path": None, "note": "none"}, "files": files,
    }  # fmt: skip
    (root / "bundle.json").write_text(json.dumps(doc))
    return root


def test_an_untouched_bundle_with_a_sync_file_passes_the_check(tmp_path: Path) -> None:
    from verl_setup.environment.bundle import check_bundle  # noqa: PLC0415

    check_bundle(read_bundle(_fa_bundle(tmp_path / "b")), lambda _s: None)


@pytest.mark.parametrize("list_sync", [True, False], ids=["listed-resealed", "old-manifest"])
def test_o1_a_line_added_to_sync_txt_is_refused_even_when_the_manifest_agrees(
    tmp_path: Path, list_sync: bool
) -> None:
    """O1: uv installs from sync.txt, so an appended hashed pin installed (and ran) anything."""
    from verl_setup.environment.bundle import check_bundle  # noqa: PLC0415
    from verl_setup.util.wheelhouse import sha256_of  # noqa: PLC0415

    root = _fa_bundle(tmp_path / "b", list_sync=list_sync)
    with (root / "sync.txt").open("a") as f:
        f.write("rel4evil @ file:///tmp/rel4evil-1.0-py3-none-any.whl --hash=sha256:" + "1" * 64 + "\n")
    doc = json.loads((root / "bundle.json").read_text())
    for f in doc["files"]:  # whoever edits sync.txt can edit its manifest entry too
        if f["path"] == "sync.txt":
            f["sha256"] = sha256_of(root / "sync.txt")
    (root / "bundle.json").write_text(json.dumps(doc))
    with pytest.raises(InstallError, match=r"sync.txt is not what the bundle's lock gives") as caught:
        check_bundle(read_bundle(root), lambda _s: None)
    assert "nothing was changed" in str(caught.value)


def test_o1_a_manifest_that_drops_sync_for_a_lock_with_url_pins_is_refused(tmp_path: Path) -> None:
    from verl_setup.environment.bundle import check_bundle  # noqa: PLC0415

    root = _fa_bundle(tmp_path / "b")
    doc = json.loads((root / "bundle.json").read_text())
    doc["sync"] = None
    (root / "bundle.json").write_text(json.dumps(doc))
    with pytest.raises(InstallError, match=r"sync\.txt is not what"):
        check_bundle(read_bundle(root), lambda _s: None)


@pytest.mark.parametrize(
    "edit",
    [
        lambda d: d.update(lock="verl.lock"),
        lambda d: d.update(python_build="python.tar"),
        lambda d: d["files"][0].update(size=float("inf")),
        lambda d: d["files"][0].update(size="1e999"),
        lambda d: d.update(files=["x"]),
        lambda d: d.update(row=["x"]),
        lambda d: d.update(lock={"sha256": 5}),
    ],
    ids=[
        "lock-string",
        "python-string",
        "size-inf",
        "size-string",
        "file-string",
        "row-list",
        "lock-sha-int",
    ],
)
def test_o2_a_manifest_of_the_wrong_shapes_is_one_line(tmp_path: Path, edit: Any) -> None:
    root = _fa_bundle(tmp_path / "b")
    doc = json.loads((root / "bundle.json").read_text())
    edit(doc)
    text = json.dumps(doc).replace("Infinity", "1e999")
    (root / "bundle.json").write_text(text)
    with pytest.raises(BadInputError, match="malformed bundle manifest") as caught:
        read_bundle(root)
    assert "\n" not in str(caught.value)


def test_o2_a_deeply_nested_manifest_is_one_line(tmp_path: Path) -> None:
    root = _fa_bundle(tmp_path / "b")
    (root / "bundle.json").write_text('{"kind": ' + "[" * 100_000 + "]" * 100_000 + "}")
    with pytest.raises(BadInputError, match="nests deeper than 64 levels"):
        read_bundle(root)
