"""Read one dump file into plain Python data, safely and within budgets.

Dumps are untrusted: a pickle is loaded with an unpickler that refuses every global, so a
hostile file cannot run code. Real dumps hold only dicts, lists, tuples, str, int, float, bool
and None, so nothing legitimate is refused. Sizes are checked before anything is read (st_size,
then gzip inflated in steps up to the budget), and only regular files are opened, non-blocking,
so a FIFO or a device named like a dump cannot stall the run. What the unpickler builds in
memory is bounded by the parse workers' address-space limit (see tables/workers.py).
"""

from __future__ import annotations

import errno
import io
import json
import os
import pickle
import re
import stat
import sys
import threading
import zlib
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, NoReturn

from frtrace.dumps.limits import Budgets, budgets
from frtrace.dumps.text import OLD_PICKLE, UTF8_BOM
from frtrace.errors import DumpError

_GZIP_MAGIC = b"\x1f\x8b"
_PICKLE_PROTO = 0x80
_DUMP_KEYS = ("version", "pg_config", "entries")
_NON_SPACE = re.compile(rb"\S")
_FILE_KINDS = {
    stat.S_IFDIR: "a directory",
    stat.S_IFIFO: "a FIFO",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFSOCK: "a socket",
    stat.S_IFLNK: "a symbolic link",
}


def clip(value: Any, limit: int = 60) -> str:
    """A short printable rendering of an untrusted value for an error message."""
    if isinstance(value, str):
        text = value
    elif isinstance(value, (int, float, bool)) or value is None:
        text = repr(value) if not isinstance(value, int) or value.bit_length() < 200 else "<int>"
    else:
        return type(value).__name__
    return text if len(text) <= limit else text[:limit] + "..."


class SafeUnpickler(pickle.Unpickler):
    """The C unpickler with globals and persistent ids disabled: plain data only."""

    def find_class(self, module: str, name: str) -> NoReturn:
        raise DumpError(
            f"pickle asks for global {clip(module)}.{clip(name)}: refused (dumps hold plain data)"
        )

    def persistent_load(self, pid: Any) -> NoReturn:
        raise DumpError("pickle asks for a persistent object: refused (dumps hold plain data)")


@dataclass
class RawDump:
    """A decoded dump and how it was stored."""

    data: dict[str, Any]
    fmt: str  # "pickle" or "json"
    compressed: bool


class _View(io.RawIOBase):
    """A read-only stream over bytes or a bytearray without copying it (BytesIO would copy a
    bytearray, and an inflated dump can be hundreds of megabytes)."""

    def __init__(self, data: bytes | bytearray) -> None:
        self._view = memoryview(data)
        self._pos = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        n = min(len(buffer), len(self._view) - self._pos)
        buffer[:n] = self._view[self._pos : self._pos + n]
        self._pos += n
        return n


_BYTEARRAY_NOISE = "deallocated bytearray object has exported buffers"
_Hook = tuple[type[BaseException], BaseException, TracebackType | None]


def _unpickle_quietly(unpickler: pickle.Unpickler) -> Any:
    """unpickler.load(), without the false alarm CPython prints on its way to a MemoryError.

    No buffer is leaked. A bogus BYTEARRAY8 length makes the C unpickler call
    PyByteArray_FromStringAndSize, which, when that allocation fails, frees its new object
    before setting ob_exports (a CPython bug, in 3.11 here). bytearray_dealloc reads the
    uninitialized field and, if the recycled memory holds a positive number there (say, the
    text of a string the pickle just popped), prints "SystemError: deallocated bytearray
    object has exported buffers" with PyErr_Print, i.e. through sys.excepthook: a second
    line on stderr for a file that is then skipped as a MemoryError. No input or API choice
    of ours avoids it (the length is read and allocated within one opcode), so that one
    message from this thread is held back during the load: dropped when the load ends in a
    MemoryError, passed on otherwise. Every other report goes straight to the outer hook.
    """
    outer = sys.excepthook
    owner = threading.get_ident()
    held: list[_Hook] = []
    loading = True

    def hook(kind: type[BaseException], value: BaseException, tb: TracebackType | None) -> None:
        if (
            loading
            and kind is SystemError
            and str(value) == _BYTEARRAY_NOISE
            and threading.get_ident() == owner
        ):
            held.append((kind, value, tb))
        else:
            outer(kind, value, tb)

    sys.excepthook = hook
    try:
        return unpickler.load()
    except MemoryError:
        held.clear()
        raise
    finally:
        loading = False  # a hook left installed by a racing thread now only passes through
        if sys.excepthook is hook:
            sys.excepthook = outer
        for report in held:
            sys.excepthook(*report)


def load_pickle(blob: bytes | bytearray) -> Any:
    """The dump pickled in `blob`, through the unpickler that refuses every global (public for
    scripts/parse_bench.py, which times it against the C fast path)."""
    # A stream with peek() lets the C unpickler prefetch; on a bare BytesIO it calls read()
    # for every opcode of these unframed protocol-2 pickles and runs 3x slower.
    stream = io.BufferedReader(_View(blob), buffer_size=1 << 16)
    try:
        return _unpickle_quietly(SafeUnpickler(stream))
    except DumpError:
        raise
    except EOFError as exc:
        raise DumpError("truncated pickle (file ends early)") from exc
    except pickle.UnpicklingError as exc:
        text = str(exc)
        if "truncated" in text:
            raise DumpError("truncated pickle (file ends early)") from exc
        raise DumpError(f"corrupt pickle ({clip(text, 120)})") from exc
    except RecursionError as exc:
        raise DumpError("pickle nested too deeply to be a dump") from exc
    except MemoryError as exc:
        raise DumpError("pickle needs more memory than the parse budget allows") from exc
    except Exception as exc:  # any other failure of the C unpickler is a corrupt file
        raise DumpError(f"corrupt pickle ({type(exc).__name__}: {clip(str(exc), 120)})") from exc


def _load_json(blob: bytes | bytearray) -> Any:
    try:
        return json.loads(blob)
    except UnicodeDecodeError as exc:
        raise DumpError("neither a pickle nor a JSON dump (not UTF-8 text)") from exc
    except json.JSONDecodeError as exc:
        raise DumpError(
            f"truncated or invalid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})"
        ) from exc
    except RecursionError as exc:
        raise DumpError("JSON nested too deeply to be a dump") from exc
    except ValueError as exc:  # e.g. an integer literal longer than Python converts
        raise DumpError(f"invalid JSON ({clip(str(exc), 120)})") from exc


def gunzip(blob: bytes | bytearray, limit: int) -> bytearray:
    """Inflate (possibly concatenated) gzip members in steps, refusing more than `limit` bytes."""
    out = bytearray()
    data = blob
    while data:
        inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
        pending = data
        while not inflater.eof:
            try:
                # small steps: the output grows in place, never beside a copy of itself
                chunk = inflater.decompress(pending, min(1 << 24, limit + 1 - len(out)))
            except zlib.error as exc:
                raise DumpError(f"corrupt gzip ({exc})") from exc
            out += chunk
            if len(out) > limit:
                raise DumpError(
                    f"gzip inflates to more than {limit:,} bytes "
                    "(above the budget max_decompressed_bytes)"
                )
            pending = inflater.unconsumed_tail
            if not chunk and not pending:
                break
        if not inflater.eof:
            raise DumpError("corrupt or truncated gzip (stream ends early)")
        data = inflater.unused_data.lstrip(b"\x00")
        if data and data[:2] != _GZIP_MAGIC:
            raise DumpError("corrupt gzip (data after the compressed stream)")
    return out


def decode(blob: bytes | bytearray, limits: Budgets | None = None) -> RawDump:
    """Decode bytes that may be gzip-compressed pickle or JSON; raise DumpError otherwise."""
    limits = limits or budgets()
    blob, compressed = inflate(blob, limits)
    return decode_inflated(blob, compressed)


def inflate(blob: bytes | bytearray, limits: Budgets) -> tuple[bytes | bytearray, bool]:
    """The dump's bytes after gzip, within the size budgets, and whether it was compressed:
    decode's first step, apart so the C fast path sees the same bytes under the same checks."""
    compressed = blob[:2] == _GZIP_MAGIC
    if compressed:
        blob = gunzip(blob, limits.max_decompressed_bytes)
    elif len(blob) > limits.max_decompressed_bytes:
        raise DumpError(
            f"{len(blob):,} bytes, above the budget max_decompressed_bytes "
            f"({limits.max_decompressed_bytes:,})"
        )
    return blob, compressed


def is_pickle(blob: bytes | bytearray) -> bool:
    """Whether inflated bytes are read as a pickle (decode's test)."""
    return blob[:1] == bytes([_PICKLE_PROTO])


def decode_inflated(blob: bytes | bytearray, compressed: bool) -> RawDump:
    """decode() of bytes already through inflate()."""
    if blob[:3] == UTF8_BOM:  # JSON written by an editor or tool that marks UTF-8
        blob = blob[3:]
    first = _NON_SPACE.search(blob)  # no stripped copy of a large blob
    if first is None:
        raise DumpError("empty file")
    if blob[0] == _PICKLE_PROTO or OLD_PICKLE.match(blob):  # protocol 2+, or 0 and 1 (ASCII)
        data, fmt = load_pickle(blob), "pickle"
    elif blob[first.start()] in b"{[":
        data, fmt = _load_json(blob), "json"
    else:
        raise DumpError("neither a pickle nor a JSON dump")
    validate(data)
    return RawDump(data, fmt, compressed)


def validate(data: Any) -> None:
    """Reject data that is not shaped like a Flight Recorder dump, with the reason."""
    if not isinstance(data, dict):
        raise DumpError(
            f"not a Flight Recorder dump (top level is {type(data).__name__}, not dict)"
        )
    if not any(key in data for key in _DUMP_KEYS):
        keys = ", ".join(sorted(clip(k, 30) for k in data if isinstance(k, str))[:5]) or "none"
        raise DumpError(f"not a Flight Recorder dump (keys: {keys}; expected version, entries)")
    entries = data.get("entries", [])
    if not isinstance(entries, list):
        raise DumpError(f"'entries' is {type(entries).__name__}, not a list")
    for key in ("pg_config", "pg_status"):
        if not isinstance(data.get(key, {}), dict):
            raise DumpError(f"'{key}' is {type(data[key]).__name__}, not a dict")


def file_kind(mode: int) -> str | None:
    """None for a regular file, else what it is ('a FIFO', ...): only regular files are read."""
    if stat.S_ISREG(mode):
        return None
    return _FILE_KINDS.get(stat.S_IFMT(mode), "not a regular file")


def read_bytes(path: Path, limits: Budgets | None = None) -> bytearray:
    """The bytes of a regular file, opened without following links or blocking, within budget."""
    limits = limits or budgets()
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
    flags |= getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise DumpError("a symbolic link, not a regular file (not followed)") from exc
        raise DumpError(f"cannot read ({exc.strerror or exc})") from exc
    try:
        info = os.fstat(fd)
        kind = file_kind(info.st_mode)
        if kind is not None:
            raise DumpError(f"{kind}, not a regular file")
        if info.st_size > limits.max_file_bytes:
            raise DumpError(
                f"{info.st_size:,} bytes, above the budget max_file_bytes "
                f"({limits.max_file_bytes:,})"
            )
        # One buffer, read into in place; the file may grow meanwhile: never past the budget.
        buffer = bytearray(info.st_size + 1)
        total = 0
        with io.FileIO(fd, "rb", closefd=False) as raw, memoryview(buffer) as view:
            while total < len(buffer):
                got = raw.readinto(view[total:])
                if not got:
                    break
                total += got
        if total == len(buffer):
            buffer += os.read(fd, limits.max_file_bytes + 1 - total)
            total = len(buffer)
        if total > limits.max_file_bytes:
            raise DumpError(f"grew past the budget max_file_bytes ({limits.max_file_bytes:,})")
        del buffer[total:]
        return buffer
    except OSError as exc:
        raise DumpError(f"cannot read ({exc.strerror or exc})") from exc
    finally:
        os.close(fd)


def read_dump(path: Path, limits: Budgets | None = None) -> RawDump:
    """Read and decode one file; every failure is a DumpError with a one-line reason."""
    return decode(read_bytes(path, limits), limits)


def read_dump_bytes(data: bytes | bytearray, name: str, limits: Budgets | None = None) -> RawDump:
    """Decode a dump already in memory (an object fetched from a store), under the same budgets
    and the same safe unpickler as a file: a store's object is as untrusted as a file. `name`
    is only for the caller's messages; every failure is a DumpError with a one-line reason."""
    limits = limits or budgets()
    if len(data) > limits.max_file_bytes:
        raise DumpError(
            f"{len(data):,} bytes, above the budget max_file_bytes ({limits.max_file_bytes:,})"
        )
    return decode(data, limits)
