"""Dumps where they live: discovery and bounded reads through fsspec URLs (s3://, gs://, ...).

A job of 100,000 ranks leaves its dumps in object storage, not in one folder of one machine.
Discovery lists the store (names and sizes, never contents) and applies the same rules as for
a folder (discover.py): rank from the name's trailing integer, prefix inferred from the largest
family, one level of sub-folders, two objects claiming one rank is an error. Objects are read
by the engine's workers, each checked against the budgets before and while it is read. fsspec
(and s3fs, gcsfs, ...) are imported only here, only for URLs. `file://` URLs are plain folders.
"""

from __future__ import annotations

import copy
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from frtrace.dumps.discover import claim_rank, infer_prefix, rank_from_name
from frtrace.dumps.limits import Budgets, budgets
from frtrace.errors import DumpError, FrtraceError

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
# Extras that bring a protocol's fsspec implementation, for the message when one is missing.
_EXTRA = {"s3": "s3", "s3a": "s3", "gs": "gcs", "gcs": "gcs"}
CHUNK = 16 << 20  # bytes per read of an object: most dumps are one request


def is_url(source: str | os.PathLike[str] | None) -> bool:
    """A scheme://... location other than a local path."""
    return isinstance(source, str) and _SCHEME.match(source) is not None


def local_path(source: str) -> Path | None:
    """The folder behind a file:// URL (None for any other URL): read as a plain folder."""
    match = _SCHEME.match(source)
    if match and match.group(1).lower() in ("file", "local"):
        return Path(source[match.end() :] or "/")
    return None


@dataclass
class StoreDiscovery:
    """One object per rank under a URL: what a folder's Discovery is for a store."""

    trace_dir: str
    prefix: str
    prefix_inferred: bool
    files: list[tuple[str, int]]  # (url, rank), by rank
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (url, reason)
    storage_options: dict[str, Any] = field(default_factory=dict)
    total_bytes: int = 0  # of the objects in `files`, as listed


def protocol(source: str) -> str | None:
    """A URL's scheme, lower-cased (None for a path)."""
    match = _SCHEME.match(source)
    return match.group(1).lower() if match else None


def resolved_options(url: str, storage_options: dict[str, Any] | None) -> dict[str, Any]:
    """The storage options completed by this process's fsspec configuration
    ($FSSPEC_S3_ENDPOINT_URL, $FSSPEC_S3_ANON, $FSSPEC_GS_PROJECT, ~/.config/fsspec/...), what
    was given winning. The client resolves them and the workers read with exactly these:
    settings that let the client list the store are missing on workers started without them."""
    options = dict(storage_options or {})
    if protocol(url) is None or local_path(url) is not None:
        return options
    try:
        import fsspec
        import fsspec.config

        cls = fsspec.get_filesystem_class(protocol(url))
    except (ImportError, ValueError):
        return options  # filesystem() says what to install
    # a copy: nested settings (client_kwargs) stay this process's own
    return {**copy.deepcopy(fsspec.config.apply_config(cls, {})), **options}


def filesystem(url: str, storage_options: dict[str, Any] | None = None) -> tuple[Any, str]:
    """The fsspec filesystem for a URL and the path inside it; a missing package is a
    FrtraceError naming the extra to install."""
    try:
        import fsspec
    except ImportError as exc:
        raise FrtraceError(
            f"{url}: reading URLs needs fsspec: pip install 'frtrace[s3]' (or fsspec)"
        ) from exc
    scheme = protocol(url) or ""
    options = resolved_options(url, storage_options)
    try:
        fs, path = fsspec.core.url_to_fs(url, **options)
    except ImportError as exc:
        raise FrtraceError(f"{url}: no reader for {scheme}:// URLs ({_hint(scheme)})") from exc
    except ValueError as exc:
        raise FrtraceError(f"{url}: {exc}") from exc
    return fs, path


def _hint(scheme: str) -> str:
    """What to install for a protocol: our extra, else fsspec's own advice (adlfs for az://)."""
    if scheme in _EXTRA:
        return f"pip install 'frtrace[{_EXTRA[scheme]}]'"
    from fsspec.registry import known_implementations

    advice = known_implementations.get(scheme, {}).get("err")
    return str(advice) if advice else f"fsspec knows no {scheme}:// implementation"


def _url(fs: Any, path: str) -> str:
    return str(fs.unstrip_protocol(path))


def _listing(fs: Any, path: str) -> list[dict[str, Any]]:
    try:
        return list(fs.ls(path, detail=True))
    except FileNotFoundError as exc:
        raise FrtraceError(f"{_url(fs, path)}: no such folder") from exc
    except Exception as exc:  # a store's errors are its own types: one line, never a traceback
        raise FrtraceError(f"cannot list {_url(fs, path)}: {type(exc).__name__}: {exc}") from exc


def discover_store(
    url: str, prefix: str | None, storage_options: dict[str, Any] | None = None
) -> StoreDiscovery:
    """List a store's folder (and one level of sub-folders) for one object per rank."""
    fs, root = filesystem(url, storage_options)
    root = root.rstrip("/")
    candidates: list[tuple[str, str, int]] = []  # (path, name, size)
    listing = _listing(fs, root)
    if [(i.get("type"), str(i["name"]).rstrip("/")) for i in listing] == [("file", root)]:
        raise FrtraceError(f"{_url(fs, root)}: not a folder (give the folder that holds the dumps)")
    for item in sorted(listing, key=lambda i: str(i["name"])):
        name = str(item["name"]).rstrip("/").rsplit("/", 1)[-1]
        if name.startswith(".") or str(item["name"]).rstrip("/") == root:
            continue
        if item.get("type") == "directory":
            for sub in sorted(_listing(fs, str(item["name"])), key=lambda i: str(i["name"])):
                sub_name = str(sub["name"]).rstrip("/").rsplit("/", 1)[-1]
                if sub.get("type") != "directory" and not sub_name.startswith("."):
                    candidates.append((str(sub["name"]), sub_name, int(sub.get("size") or 0)))
        else:
            candidates.append((str(item["name"]), name, int(item.get("size") or 0)))
    inferred = prefix is None
    if prefix is None:
        prefix, _others = infer_prefix([name for _path, name, _size in candidates])
    files: list[tuple[str, int]] = []
    skipped: list[tuple[str, str]] = []
    by_rank: dict[int, str] = {}
    max_rank = budgets().max_rank
    total = 0
    for path, name, size in candidates:
        rank = rank_from_name(name)
        if not name.startswith(prefix) or rank is None:
            continue
        full = _url(fs, path)
        if claim_rank(by_rank, rank, full, max_rank, skipped):
            files.append((full, rank))
            total += size
    files.sort(key=lambda f: f[1])
    options = resolved_options(url, storage_options)
    return StoreDiscovery(url.rstrip("/"), prefix, inferred, files, skipped, options, total)


def download(
    url: str,
    dest: str,
    storage_options: dict[str, Any] | None = None,
    limits: Budgets | None = None,
) -> None:
    """An object's bytes into the new file `dest`, a chunk at a time: refused when the store
    says it is over max_file_bytes and never read past that budget (an object may be replaced
    while it is read). In chunks, so that several downloads at once hold no whole object."""
    limits = limits or budgets()
    fs, path = filesystem(url, storage_options)
    try:
        # no read-ahead cache: each read is one ranged request, of at most CHUNK bytes
        with fs.open(path, "rb", cache_type="none") as f, open(dest, "xb") as out:
            size = getattr(f, "size", None)  # the store's answer to open(), or None
            if size is not None and int(size) > limits.max_file_bytes:
                raise DumpError(
                    f"{int(size):,} bytes, above the budget max_file_bytes "
                    f"({limits.max_file_bytes:,})"
                )
            total = 0
            while chunk := f.read(min(CHUNK, limits.max_file_bytes + 1 - total)):
                total += len(chunk)
                if total > limits.max_file_bytes:
                    raise DumpError(
                        f"grew past the budget max_file_bytes ({limits.max_file_bytes:,})"
                    )
                out.write(chunk)
    except DumpError:
        raise
    except Exception as exc:
        raise _unreadable(exc) from exc


def probe(url: str, storage_options: dict[str, Any] | None = None) -> None:
    """Raise the DumpError download would if this process cannot reach the object (credentials,
    endpoint, network), asking the store for its size only: no dump bytes are read."""
    fs, path = filesystem(url, storage_options)
    fs.invalidate_cache(path)  # a size listed earlier in this process proves nothing now
    try:
        fs.size(path)
    except Exception as exc:
        raise _unreadable(exc) from exc


NO_SUCH_OBJECT = "cannot read (no such object)"  # listed, and gone since


def _unreadable(exc: BaseException) -> DumpError:
    """A store's own error (its types are its own) as one line for this object only."""
    if isinstance(exc, FileNotFoundError):
        return DumpError(NO_SUCH_OBJECT)
    return DumpError(f"cannot read ({type(exc).__name__}: {str(exc)[:120]})")
