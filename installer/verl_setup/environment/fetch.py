"""Files fetched by URL (file://, http://, https://) into a folder, each checked against the
sha256 it must have as its bytes arrive; reused from an earlier copy when that still hashes right.
Four at a time, with one status line; a failure or Ctrl-C stops the others."""

from __future__ import annotations

import contextlib
import hashlib
import os
import threading
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlsplit

from verl_setup.errors import InstallError
from verl_setup.output import Progress
from verl_setup.util.secrets import mask
from verl_setup.util.wheelhouse import sha256_of

DOWNLOADERS = 4


@dataclass(frozen=True, kw_only=True)
class Wanted:
    """One file the bundle must hold: where the index serves it, its sha256, why it is wanted."""

    name: str  # the file name in wheels/
    url: str
    sha256: str
    size: int | None
    role: str  # lock: a file of a pin; build: a wheel an sdist of the lock builds with


def fetch(wanted: list[Wanted], folder: Path, reuse: Mapping[str, Path], progress: Progress) -> None:
    """Put every wanted file into `folder`, sha256 checked: reused, copied or downloaded."""
    total = sum(w.size or 0 for w in wanted)
    done, count, reused = 0, 0, 0
    progress.step("download", f"{len(wanted)} files, {total / 2**30:.2f} GiB")

    def got(n: int) -> None:
        nonlocal done
        done += n

    stop = threading.Event()  # Ctrl-C, or another file failed: the other downloads end too
    with ThreadPoolExecutor(max_workers=DOWNLOADERS) as pool:
        jobs = {pool.submit(_one, w, folder / w.name, reuse.get(w.sha256), got, stop): w for w in wanted}
        try:
            for future in as_completed(jobs):
                reused += future.result()
                count += 1
                progress.status(
                    f"download: {count}/{len(wanted)} files, {done / 2**30:.2f} of {total / 2**30:.2f} GiB "
                    f"({jobs[future].name})",
                    every=10.0,
                )
        except BaseException:
            stop.set()
            raise
        finally:
            for future in jobs:
                future.cancel()
    if reused:
        progress.say(f"{reused} of {len(wanted)} files reused from the bundle already there")


def _one(
    w: Wanted, target: Path, old: Path | None, got: Callable[[int], None], stop: threading.Event
) -> bool:
    """One file into `target`: reused from the old bundle when its bytes still hash right (True)."""
    if old is not None and old.is_file() and sha256_of(old) == w.sha256:
        with contextlib.suppress(OSError):
            os.link(old, target)
            got(w.size or 0)
            return True
    partial = target.with_name(f".{target.name}.part")
    digest = _download(w, partial, got, stop)
    if digest != w.sha256:
        partial.unlink(missing_ok=True)
        raise InstallError(f"{w.name}: sha256 {digest} is not the lock's {w.sha256} (from {mask(w.url)})")
    partial.rename(target)
    return False


def _download(w: Wanted, partial: Path, got: Callable[[int], None], stop: threading.Event) -> str:
    digest = hashlib.sha256()
    with partial.open("wb") as sink:
        for block in _blocks(w.url, _deadline(w.size)):
            if stop.is_set():
                raise InstallError("stopped")
            digest.update(block)
            sink.write(block)
            got(len(block))
    return digest.hexdigest()


def _deadline(size: int | None) -> float:
    """The whole file's time: 10 minutes, plus what it takes at 1 MiB/s (a slow site's floor)."""
    return 600.0 + (size or 4 * 2**30) / 2**20


def _blocks(url: str, deadline_s: float) -> Iterator[bytes]:
    """The bytes at a file://, http:// or https:// URL, 1 MiB at a time."""
    if url.startswith("file://"):
        path = Path(unquote(urlsplit(url).path))
        try:
            with path.open("rb") as f:
                while block := f.read(1 << 20):
                    yield block
        except OSError as exc:
            raise InstallError(f"cannot read {path}: {exc.strerror or exc}") from exc
        return
    from verl_setup.util import web  # noqa: PLC0415  # the one HTTP client: CAs, netrc, URL credentials

    try:
        with web.get(url, deadline_s=deadline_s) as answer:
            yield from answer.blocks
    except web.WebError as exc:
        raise InstallError(f"{exc}; nothing was bundled") from exc
