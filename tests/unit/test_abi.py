"""The ELF reader on this interpreter's own shared objects, the ABI check's inference of a build's
torch, and the wheelhouse layout (manifest, PEP 503 pages, the build record inside a wheel)."""

from __future__ import annotations

import _ctypes
import base64
import hashlib
import json
import zipfile
from pathlib import Path

import pytest

from verl_setup.environment.abi import Torch, _built_torch, check_site_packages
from verl_setup.util.elf import ElfError, SharedObject
from verl_setup.util.wheelhouse import (
    BUILD_RECORD,
    Manifest,
    Wheelhouse,
    WheelhouseError,
    add_build_record,
    read_manifest,
    sha256_of,
)

CTYPES = Path(_ctypes.__file__)


def _loaded_libc() -> Path:
    for line in Path("/proc/self/maps").read_text().splitlines():
        path = line.split()[-1]
        if "/libc.so" in path or "/libc-" in path:
            return Path(path)
    pytest.skip("no libc mapped (not glibc)")
    raise AssertionError  # unreachable


def test_an_extension_module_needs_libraries_and_leaves_python_symbols_undefined() -> None:
    with SharedObject(CTYPES) as obj:
        undefined = obj.undefined()
        assert any(name.startswith("libffi.so") for name in obj.needed)
        assert "PyModule_Create2" in undefined or "PyModuleDef_Init" in undefined
        assert "PyInit__ctypes" not in undefined
        assert obj.defines(["PyInit__ctypes", "no_such_symbol"]) == {"PyInit__ctypes"}


def test_hash_lookups_agree_with_a_full_scan_of_the_exports() -> None:
    with SharedObject(_loaded_libc()) as libc:
        exports = sorted(libc.exports())
        sample = exports[:: max(1, len(exports) // 400)]
        assert libc.soname == "libc.so.6"
        assert libc.defines([*sample, "malloc", "surely_not_in_libc_xyz"]) == {*sample, "malloc"}


@pytest.mark.parametrize(
    ("content", "words"),
    [
        (b"not an elf at all" * 8, "is not an ELF file"),
        (b"\x7fELF\x01\x01\x01" + b"\0" * 120, "is not a 64-bit ELF file"),
        (None, "truncated"),
    ],
    ids=["text", "elf32", "truncated"],
)
def test_a_bad_shared_object_is_one_clear_error(tmp_path: Path, content: bytes | None, words: str) -> None:
    bad = tmp_path / "bad.so"
    bad.write_bytes(content if content is not None else CTYPES.read_bytes()[: CTYPES.stat().st_size // 2])
    with pytest.raises(ElfError, match=words) as caught:
        SharedObject(bad)
    assert "\n" not in str(caught.value)


TORCH_211 = Torch(version="2.11.0", cuda="13.0", cxx11abi=True, lib=Path("/nonexistent"))


def test_a_build_that_needs_pre_cxx11_names_is_named_as_such_without_a_record_or_label() -> None:
    missing = ["_ZN3c106detail14torchCheckFailEPKcS2_jRKSs"]
    assert "pre-C++11 ABI" in str(_built_torch(None, missing, TORCH_211))
    assert _built_torch(None, ["_ZN3c104cuda9SetDeviceEi"], TORCH_211) is None


def test_a_folder_without_torch_has_nothing_to_check(tmp_path: Path) -> None:
    report = check_site_packages([tmp_path])
    assert report.ok
    assert report.torch is None
    assert report.notes == ("no torch installed: nothing to check",)


def _wheel(folder: Path, name: str = "flash_attn", version: str = "2.8.3") -> Path:
    path = folder / f"{name}-{version}-cp312-cp312-linux_x86_64.whl"
    info = f"{name}-{version}.dist-info"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr(f"{info}/METADATA", f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
        z.writestr(f"{name}/__init__.py", "")
        z.writestr(f"{info}/RECORD", f"{name}/__init__.py,,\n{info}/METADATA,,\n{info}/RECORD,,\n")
    return path


def _manifest(wheel: Path, **changes: object) -> Manifest:
    data = {
        "schema": 1,
        "name": "flash-attn",
        "version": "2.8.3",
        "torch": "2.11.0",
        "cuda": "13.0",
        "python": "cp312",
        "abi": True,
        "arch_list": ["8.0", "9.0"],
        "platform": "linux_x86_64",
        "source": {"name": "flash-attn", "version": "2.8.3", "sha256": "ab" * 32, "url": None},
        "sha256": sha256_of(wheel),
        "built_at": "2026-12-01T19:00:00Z",
        "built_with": {"nvcc": "13.0.88", "compiler": "g++ 12.2.0"},
        **changes,
    }
    return Manifest.from_json(data, "test")


def test_a_wheel_added_to_a_wheelhouse_is_listed_in_its_pep503_pages(tmp_path: Path) -> None:
    wheel = _wheel(tmp_path)
    house = Wheelhouse(tmp_path / "house")
    entry = house.add(wheel, _manifest(wheel))
    project = (tmp_path / "house/simple/flash-attn/index.html").read_text()
    assert f'<a href="../../wheels/{wheel.name}#sha256={sha256_of(wheel)}">{wheel.name}</a>' in project
    assert '<a href="flash-attn/">flash-attn</a>' in (tmp_path / "house/simple/index.html").read_text()
    assert read_manifest(entry.wheel.with_name(entry.wheel.name + ".json")) == entry.manifest
    assert house.find("Flash_Attn", torch="2.11.0+cu130", python="cp312") == [entry]
    assert house.find("flash-attn", torch="2.10.0") == []


@pytest.mark.parametrize(
    ("changes", "words"),
    [
        ({"schema": 2}, "schema 2 is not 1"),
        ({"abi": "yes"}, "abi must be true or false"),
        ({"torch": ""}, "must be non-empty strings"),
        ({"colour": "blue"}, "unknown keys colour"),
    ],
    ids=["schema", "abi", "torch", "unknown"],
)
def test_a_bad_manifest_is_refused_naming_the_problem(
    tmp_path: Path, changes: dict[str, object], words: str
) -> None:
    wheel = _wheel(tmp_path)
    with pytest.raises(WheelhouseError, match=words):
        _manifest(wheel, **changes)


def test_a_rebuilt_wheel_under_the_same_name_no_longer_matches_its_manifest(tmp_path: Path) -> None:
    wheel = _wheel(tmp_path)
    house = Wheelhouse(tmp_path / "house")
    entry = house.add(wheel, _manifest(wheel))
    with zipfile.ZipFile(entry.wheel, "a") as z:
        z.writestr("flash_attn/extra.py", "")
    assert house.entries()  # unverified listing is cheap
    with pytest.raises(WheelhouseError, match="sha256 differs"):
        house.entries(verify=True)


def test_the_build_record_goes_into_the_wheel_with_its_record_line(tmp_path: Path) -> None:
    wheel = _wheel(tmp_path)
    add_build_record(wheel, {"torch": "2.11.0", "cuda": "13.0"})
    with zipfile.ZipFile(wheel) as z:
        payload = z.read(f"flash_attn-2.8.3.dist-info/{BUILD_RECORD}")
        record = z.read("flash_attn-2.8.3.dist-info/RECORD").decode()
    assert json.loads(payload) == {"cuda": "13.0", "torch": "2.11.0"}
    digest = base64.urlsafe_b64encode(hashlib.sha256(payload).digest()).rstrip(b"=").decode()
    assert f"flash_attn-2.8.3.dist-info/{BUILD_RECORD},sha256={digest},{len(payload)}" in record


@pytest.mark.parametrize(
    ("name", "skipped"),
    [
        ("_C.cpython-310-x86_64-linux-gnu.so", True),  # deep_gemm ships one per CPython
        ("_C.cpython-312-x86_64-linux-gnu.so", False),
        ("libtorch_c_dlpack_addon_torch29-cuda.so", True),  # torch_c_dlpack_ext: one per torch minor
        ("libtorch_c_dlpack_addon_torch211-cuda.so", False),
        ("flash_attn_2_cuda.cpython-312-x86_64-linux-gnu.so", False),
        ("libtorchcodec_core7.so", False),  # an FFmpeg major, not a torch version
    ],
)
def test_builds_named_for_another_python_or_torch_are_left_out(name: str, skipped: bool) -> None:
    from verl_setup.environment.abi import _other_variant  # noqa: PLC0415

    path = Path("/env/lib/python3.12/site-packages/pkg") / name
    assert _other_variant(path, TORCH_211) is skipped
