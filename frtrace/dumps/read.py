"""Read one dump file into plain Python data, safely.

Dumps are untrusted: a pickle is loaded with an unpickler that refuses every global, so a
hostile file cannot run code. Real dumps hold only dicts, lists, tuples, str, int, float, bool
and None, so nothing legitimate is refused.
"""

from __future__ import annotations

import gzip
import io
import json
import pickle
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

from frtrace.errors import DumpError

_GZIP_MAGIC = b"\x1f\x8b"
_PICKLE_PROTO = 0x80
_DUMP_KEYS = ("version", "pg_config", "entries")


class SafeUnpickler(pickle.Unpickler):
    """The C unpickler with globals and persistent ids disabled: plain data only."""

    def find_class(self, module: str, name: str) -> NoReturn:
        raise DumpError(f"pickle asks for global {module}.{name}: refused (dumps hold plain data)")

    def persistent_load(self, pid: Any) -> NoReturn:
        raise DumpError("pickle asks for a persistent object: refused (dumps hold plain data)")


@dataclass
class RawDump:
    """A decoded dump and how it was stored."""

    data: dict[str, Any]
    fmt: str  # "pickle" or "json"
    compressed: bool


def _load_pickle(blob: bytes) -> Any:
    # A stream with peek() lets the C unpickler prefetch; on a bare BytesIO it calls read()
    # for every opcode of these unframed protocol-2 pickles and runs 3x slower.
    stream = io.BufferedReader(io.BytesIO(blob), buffer_size=1 << 16)
    try:
        return SafeUnpickler(stream).load()
    except DumpError:
        raise
    except EOFError as exc:
        raise DumpError("truncated pickle (file ends early)") from exc
    except pickle.UnpicklingError as exc:
        text = str(exc)
        if "truncated" in text:
            raise DumpError("truncated pickle (file ends early)") from exc
        raise DumpError(f"corrupt pickle ({text})") from exc
    except (ValueError, TypeError, KeyError, IndexError, AttributeError, MemoryError) as exc:
        raise DumpError(f"corrupt pickle ({type(exc).__name__}: {exc})") from exc


def _load_json(blob: bytes) -> Any:
    try:
        return json.loads(blob)
    except UnicodeDecodeError as exc:
        raise DumpError("neither a pickle nor a JSON dump (not UTF-8 text)") from exc
    except json.JSONDecodeError as exc:
        raise DumpError(
            f"truncated or invalid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})"
        ) from exc


def decode(blob: bytes) -> RawDump:
    """Decode bytes that may be gzip-compressed pickle or JSON; raise DumpError otherwise."""
    compressed = blob[:2] == _GZIP_MAGIC
    if compressed:
        try:
            blob = gzip.decompress(blob)
        except (OSError, EOFError, zlib.error) as exc:
            raise DumpError(f"corrupt or truncated gzip ({exc})") from exc
    if not blob.strip():
        raise DumpError("empty file")
    if blob[0] == _PICKLE_PROTO:
        data, fmt = _load_pickle(blob), "pickle"
    elif blob.lstrip()[:1] in (b"{", b"["):
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
        keys = ", ".join(sorted(map(str, data))[:5]) or "none"
        raise DumpError(f"not a Flight Recorder dump (keys: {keys}; expected version, entries)")
    entries = data.get("entries", [])
    if not isinstance(entries, list):
        raise DumpError(f"'entries' is {type(entries).__name__}, not a list")
    for key in ("pg_config", "pg_status"):
        if not isinstance(data.get(key, {}), dict):
            raise DumpError(f"'{key}' is {type(data[key]).__name__}, not a dict")


def read_dump(path: Path) -> RawDump:
    """Read and decode one file; every failure is a DumpError with a one-line reason."""
    try:
        blob = path.read_bytes()
    except OSError as exc:
        raise DumpError(f"cannot read ({exc.strerror or exc})") from exc
    return decode(blob)
