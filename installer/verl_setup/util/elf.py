"""Pure-Python reading of what a 64-bit ELF shared object asks of the dynamic linker: its NEEDED
libraries, its undefined dynamic symbols, and whether it exports a name (looked up through its
GNU hash table, as ld.so does, so a 500 MB libtorch_cpu.so costs microseconds per name).

Only the section headers, .dynamic, .dynsym, .dynstr and .gnu.hash are touched (through mmap),
never the code, so reading is fast and bounded whatever the file's size.
"""

from __future__ import annotations

import mmap
import os
import stat
import struct
from collections.abc import Iterable, Iterator
from pathlib import Path
from types import TracebackType

_MAGIC = b"\x7fELF"
_SHT_DYNAMIC, _SHT_NOBITS, _SHT_DYNSYM, _SHT_GNU_HASH = 6, 8, 11, 0x6FFFFFF6
_DT_NULL, _DT_NEEDED, _DT_SONAME = 0, 1, 14
_STB_GLOBAL, _STB_WEAK, _STB_GNU_UNIQUE = 1, 2, 10
_STV_HIDDEN, _STV_INTERNAL = 2, 1
_SYM_SIZE = 24  # Elf64_Sym
MAX_SECTIONS = 1 << 16
MAX_NAME = 1 << 16  # bytes of one symbol name (torch's longest mangled names are ~2 KB)


class ElfError(Exception):
    """The file is not a readable 64-bit ELF object; the message is one line."""


class SharedObject:
    """One ELF file opened for dynamic-symbol questions; use as a context manager."""

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
        except OSError as exc:
            raise ElfError(f"cannot open {path}: {exc.strerror or exc}") from exc
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode) or info.st_size < 64:
                raise ElfError(f"{path} is not an ELF file")
            self._map = mmap.mmap(fd, 0, access=mmap.ACCESS_READ)
        except OSError as exc:
            raise ElfError(f"cannot map {path}: {exc.strerror or exc}") from exc
        finally:
            os.close(fd)
        try:
            self._parse()
        except (struct.error, IndexError, ValueError) as exc:
            self.close()
            raise ElfError(f"{path} is a damaged ELF file ({exc})") from exc
        except ElfError:
            self.close()
            raise

    def __enter__(self) -> SharedObject:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        """Unmap the file."""
        self._map.close()

    def _parse(self) -> None:
        data = self._map
        if data[:4] != _MAGIC:
            raise ElfError(f"{self.path} is not an ELF file")
        if data[4] != 2:
            raise ElfError(f"{self.path} is not a 64-bit ELF file")
        self._end = "<" if data[5] == 1 else ">"
        shoff, shentsize, shnum = self._unpack("Q", 0x28)[0], *self._unpack("HH", 0x3A)
        if shnum == 0 or shnum > MAX_SECTIONS or shentsize < 64:
            raise ElfError(f"{self.path} has no usable section headers")
        if shoff + shnum * shentsize > len(data):
            raise ElfError(f"{self.path} is truncated")
        sections = [self._unpack("IIQQQQIIQQ", shoff + i * shentsize) for i in range(shnum)]
        self._dynsym = self._dynstr = self._gnu_hash = (0, 0)
        dynamic: tuple[int, int, int] | None = None
        for _name, kind, _flags, _addr, offset, size, link, _info, _align, _entsize in sections:
            if kind != _SHT_NOBITS and offset + size > len(data):
                raise ElfError(f"{self.path} is truncated")
            if kind == _SHT_DYNSYM:
                self._dynsym = (offset, size)
                str_section = sections[link]
                self._dynstr = (str_section[4], str_section[5])
            elif kind == _SHT_GNU_HASH:
                self._gnu_hash = (offset, size)
            elif kind == _SHT_DYNAMIC:
                dynamic = (offset, size, link)
        self.needed: tuple[str, ...] = ()
        self.soname: str | None = None
        if dynamic is not None:
            offset, size, link = dynamic
            self._read_dynamic(data[offset : offset + size], (sections[link][4], sections[link][5]))

    def _read_dynamic(self, entries: bytes, strtab: tuple[int, int]) -> None:
        needed = []
        for tag, value in struct.iter_unpack(self._end + "qQ", entries[: len(entries) - len(entries) % 16]):
            if tag == _DT_NULL:
                break
            if tag == _DT_NEEDED:
                needed.append(self._string(strtab, value).decode("utf-8", "replace"))
            elif tag == _DT_SONAME:
                self.soname = self._string(strtab, value).decode("utf-8", "replace")
        self.needed = tuple(needed)

    def _unpack(self, fmt: str, offset: int) -> tuple[int, ...]:
        return struct.unpack_from(self._end + fmt, self._map, offset)

    def _string(self, table: tuple[int, int], index: int) -> bytes:
        start, size = table
        if index >= size:
            raise ElfError(f"{self.path}: a string index lies outside its table")
        end = self._map.find(b"\0", start + index, min(start + size, start + index + MAX_NAME))
        if end < 0:
            raise ElfError(f"{self.path}: an unterminated symbol name")
        return self._map[start + index : end]

    def _symbols(self) -> Iterator[tuple[bytes, int, int, int]]:
        """(name, binding, visibility, section index) of every dynamic symbol but the null one."""
        offset, size = self._dynsym
        view = self._map[offset : offset + size - size % _SYM_SIZE]
        for index, (name, info, other, shndx, _value, _size) in enumerate(
            struct.iter_unpack(self._end + "IBBHQQ", view)
        ):
            if index and name:
                yield self._string(self._dynstr, name), info >> 4, other & 3, shndx

    def undefined(self) -> frozenset[str]:
        """The names this object needs from elsewhere (weak references may stay unresolved)."""
        return frozenset(
            name.decode("utf-8", "replace")
            for name, binding, _vis, shndx in self._symbols()
            if shndx == 0 and binding == _STB_GLOBAL
        )

    def exports(self) -> frozenset[str]:
        """Every name this object defines for others (a full scan; prefer defines() for lookups)."""
        return frozenset(
            name.decode("utf-8", "replace")
            for name, binding, vis, shndx in self._symbols()
            if shndx != 0 and _exported(binding, vis)
        )

    def mentions(self, fragment: bytes) -> bool:
        """Whether any dynamic symbol name contains `fragment` (a cheap byte search of .dynstr)."""
        start, size = self._dynstr
        return size > 0 and self._map.find(fragment, start, start + size) >= 0

    def defines(self, names: Iterable[str]) -> set[str]:
        """Which of `names` this object exports, through .gnu.hash where it has one."""
        wanted = set(names)
        if not self._gnu_hash[1]:
            return wanted & self.exports()
        return {name for name in wanted if self._lookup(name.encode("utf-8", "surrogateescape"))}

    def _lookup(self, name: bytes) -> bool:
        offset, size = self._gnu_hash
        nbuckets, symoffset, bloom_size, _shift = self._unpack("IIII", offset)
        if nbuckets == 0:
            return False
        buckets = offset + 16 + bloom_size * 8
        chains = buckets + nbuckets * 4
        digest = 5381
        for byte in name:
            digest = (digest * 33 + byte) & 0xFFFFFFFF
        index = self._unpack("I", buckets + (digest % nbuckets) * 4)[0]
        if index < symoffset:
            return False
        sym_offset, sym_size = self._dynsym
        while True:
            position = chains + (index - symoffset) * 4
            if position + 4 > offset + size or (index + 1) * _SYM_SIZE > sym_size:
                return False
            chain = self._unpack("I", position)[0]
            if (chain | 1) == (digest | 1):
                st_name, info, other, shndx = self._unpack("IBBH", sym_offset + index * _SYM_SIZE)
                if (
                    shndx != 0
                    and _exported(info >> 4, other & 3)
                    and self._string(self._dynstr, st_name) == name
                ):
                    return True
            if chain & 1:
                return False
            index += 1


def _exported(binding: int, visibility: int) -> bool:
    return binding in (_STB_GLOBAL, _STB_WEAK, _STB_GNU_UNIQUE) and visibility not in (
        _STV_HIDDEN,
        _STV_INTERNAL,
    )


def is_elf(path: Path) -> bool:
    """Whether `path` is a regular file that starts with the ELF magic."""
    try:
        with path.open("rb") as handle:
            return handle.read(4) == _MAGIC
    except OSError:
        return False
