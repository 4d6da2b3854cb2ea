"""A package index on 127.0.0.1 for `matrix check` and `matrix propose` tests (PEP 503, 691, 700).

It serves stand-in wheels built with tests/fixtures/tiny-matrix/make_wheels.py, each with an
upload time, a yank state and its core metadata (PEP 658), and tests change it while it runs:
upload a release, yank a file, delete one. Every answer says `no-cache`, so uv asks again.
"""

from __future__ import annotations

import hashlib
import html
import importlib.util
import io
import json
import tarfile
import threading
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import ModuleType
from urllib.parse import unquote

from packaging.utils import canonicalize_name, parse_sdist_filename, parse_wheel_filename

MAKE_WHEELS = Path(__file__).resolve().parents[1] / "fixtures" / "tiny-matrix" / "make_wheels.py"


def _load_make_wheels() -> ModuleType:
    # The fixture folder has a dash in its name (it is data, not a package): load the builder by path.
    spec = importlib.util.spec_from_file_location("make_wheels", MAKE_WHEELS)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


build_wheel = _load_make_wheels().build_wheel

JSON_TYPE = "application/vnd.pypi.simple.v1+json"


@dataclass
class Served:
    """One file on the index."""

    path: Path
    upload_time: str
    yanked: str | None = None

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.path.read_bytes()).hexdigest()

    def metadata(self) -> bytes:
        if not self.path.name.endswith(".whl"):
            return b""
        with zipfile.ZipFile(self.path) as zf:
            name = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
            return zf.read(name)

    def requires_python(self) -> str | None:
        for line in self.metadata().decode().splitlines():
            if line.startswith("Requires-Python:"):
                return line.split(":", 1)[1].strip()
        return None


@dataclass
class LocalIndex:
    """The index's state (projects -> files) and where it is served."""

    root: Path
    files: dict[str, Served] = field(default_factory=dict)
    url: str = ""

    def upload(
        self,
        name: str,
        version: str,
        *,
        date: str,
        requires: tuple[str, ...] = (),
        headers: tuple[str, ...] = (),
        tag: str = "py3-none-any",
    ) -> str:
        """Build a stand-in wheel and put it on the index, uploaded on `date` (YYYY-MM-DD)."""
        module = canonicalize_name(name).replace("-", "_")
        filename = f"{module}-{version}-{tag}.whl"
        path = build_wheel(
            self.root,
            name=name,
            version=version,
            files={f"{module}/__init__.py": f'__version__ = "{version}"\n'},
            requires=requires,
            scripts={},
            filename=filename,
            tag=tag,
            headers=headers,
        )
        self.files[filename] = Served(path=path, upload_time=f"{date}T12:00:00.000000Z")
        return filename

    def upload_sdist(self, name: str, version: str, *, date: str, pyproject: str) -> str:
        """An sdist holding only its pyproject.toml (what `matrix propose` reads of one)."""
        root = f"{canonicalize_name(name).replace('-', '_')}-{version}"
        data = pyproject.encode()
        raw = io.BytesIO()
        with tarfile.open(fileobj=raw, mode="w:gz") as tar:
            info = tarfile.TarInfo(f"{root}/pyproject.toml")
            info.size, info.mtime = len(data), 0
            tar.addfile(info, io.BytesIO(data))
        path = self.root / f"{root}.tar.gz"
        path.write_bytes(raw.getvalue())
        self.files[path.name] = Served(path=path, upload_time=f"{date}T12:00:00.000000Z")
        return path.name

    def yank(self, filename: str, reason: str) -> None:
        self.files[filename].yanked = reason

    def delete(self, filename: str) -> None:
        del self.files[filename]

    def project(self, name: str) -> list[tuple[str, Served]]:
        return sorted((fn, f) for fn, f in self.files.items() if _name_version(fn)[0] == name)


def _name_version(filename: str) -> tuple[str, str]:
    if filename.endswith(".whl"):
        name, version, _, _ = parse_wheel_filename(filename)
    else:
        name, version = parse_sdist_filename(filename)
    return canonicalize_name(name), str(version)


def _page(index: LocalIndex, name: str, as_json: bool) -> bytes:
    files = index.project(name)
    if as_json:
        entries = [
            {
                "filename": fn,
                "url": f"../../files/{fn}",
                "hashes": {"sha256": f.sha256},
                "requires-python": f.requires_python(),
                "upload-time": f.upload_time,
                "yanked": False if f.yanked is None else f.yanked,
                "core-metadata": {"sha256": hashlib.sha256(f.metadata()).hexdigest()}
                if f.metadata()
                else False,
            }
            for fn, f in files
        ]
        versions = sorted({_name_version(fn)[1] for fn, _ in files})
        page = {"meta": {"api-version": "1.1"}, "name": name, "files": entries, "versions": versions}
        return json.dumps(page).encode()
    links = "".join(
        f'<a href="../../files/{fn}#sha256={f.sha256}"'
        + (f' data-yanked="{html.escape(f.yanked)}"' if f.yanked is not None else "")
        + f' data-core-metadata="sha256={hashlib.sha256(f.metadata()).hexdigest()}">{fn}</a>\n'
        for fn, f in files
    )
    return f"<!DOCTYPE html><html><body>\n{links}</body></html>\n".encode()


@contextmanager
def serve(root: Path) -> Iterator[LocalIndex]:
    """A LocalIndex served on 127.0.0.1 (a free port) for the duration of the block."""
    index = LocalIndex(root=root)
    root.mkdir(parents=True, exist_ok=True)

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:  # the base class's name
            pass

        def _send(self, body: bytes, content_type: str) -> None:
            self.send_response(200)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-cache")
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:  # the http.server hook
            parts = [p for p in self.path.split("?", 1)[0].split("/") if p]
            if len(parts) == 2 and parts[0] == "simple":
                as_json = JSON_TYPE in self.headers.get("Accept", "")
                body = _page(index, canonicalize_name(parts[1]), as_json)
                self._send(body, JSON_TYPE if as_json else "text/html")
            elif len(parts) == 2 and parts[0] == "files":
                name = unquote(parts[1])  # pip quotes a local version's "+" (%2B); uv does not
                served = index.files.get(name.removesuffix(".metadata"))
                if served is None:
                    self.send_error(404)
                elif name.endswith(".metadata"):
                    self._send(served.metadata(), "text/plain")
                else:
                    self._send(served.path.read_bytes(), "application/octet-stream")
            else:
                self.send_error(404)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    index.url = f"http://127.0.0.1:{server.server_address[1]}/simple/"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield index
    finally:
        server.shutdown()
        server.server_close()
