"""Reading untrusted text files within budgets, and telling dumps, logs and stacks apart.

A log copied off a node can be gigabytes, hold binary junk (a crashed writer, a core dump
pasted in), lines of megabytes (a tensor printed whole) and terminal escape codes (progress
bars, colors). Lines are streamed in chunks: at most `max_log_bytes` of a file are read (its
head and its tail, where a failure is written, when it is larger), every line is cut at
`max_log_line` bytes without ever holding more, binary lines are skipped, and escape
sequences are removed before parsing. Nothing read here is printed unescaped: the reports
escape every string (frtrace.report.fmt.safe).
"""

from __future__ import annotations

import errno
import os
import re
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from frtrace.dumps.limits import budgets

SNIFF_BYTES = 4096  # what is read of a file to tell what it is
CHUNK = 1 << 16
HEAD_SHARE = 8  # a file over budget: 1/8 of the budget from its head, the rest from its tail

DUMP, LOG, TEXT, STACKS, BINARY, EMPTY, UNREADABLE = (
    "dump",
    "log",  # text with the structure of a log (below)
    "text",  # other text: a log only where its name claims no rank
    "stacks",
    "binary",
    "empty",
    "unreadable",
)
UTF8_BOM = b"\xef\xbb\xbf"

# CSI (colors, cursor moves), OSC (titles, links; ended by BEL or ST) and other ESC sequences.
ANSI = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)?|[@-Z\\-_])")
# py-spy's first line of a process (py-spy src/dump.rs, print_traces), or the label line
# `frtrace collect` writes before it.
_STACKS_START = re.compile(r"^(?:# frtrace-collect |Process \d+: )", re.MULTILINE)
_JSON_ARRAY = re.compile(rb'\[\s*(?:[{\["\]]|$)')
# A pickle of protocol 0 or 1 (ASCII opcodes): a dict, list or tuple or a global first; torch
# writes protocol 2 and later, but a pickle of any protocol is read as one (safely: no globals).
OLD_PICKLE = re.compile(
    rb"^(?:\((?:dp|lp|tp|I|V|S|F|N|\(|\n)|\}|\]|\)|c[A-Za-z_][\w.]{0,200}\n[A-Za-z_])"
)
# What only a log's lines look like (a file is a log by positive structure, never because it
# is text): launcher prefixes (torchrun's `[<role><local_rank>]:` and the excepthook's
# `[rank<N>]:`, torch/distributed/elastic/multiprocessing/tail_log.py and
# distributed_c10d.py; srun --label's `<task>: `, slurm src/common/write_labelled_message.c),
# glog headers (`W1128 12:10:20.878000 3103 file.py:874]`, c10's `[W1128 12:21:15.80 file:524]`),
# timestamps, Python tracebacks and faulthandler, and the words torch, NCCL, torchrun and slurm
# write (frtrace.evidence.logs cites each).
_LOG_STRUCTURE = re.compile(
    r"^(?:\[[^\[\]\s]{1,128}\]:"  # [nodeA:1]: [default0]: [rank3]: [17:0]:
    r"|(?:P\d{1,6} )? {0,8}\d{1,7}: "  # srun --label
    r"|\[?[IWEF]\d{4} \d\d:\d\d:\d\d"  # glog / c10 logging
    r"|(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL|FATAL)\b"  # logging's default format
    r"|Traceback \(most recent call last\):"
    r'|\s+File ".{1,1024}", line \d+'
    r"|(?:Fatal Python error|Current thread 0x|Thread 0x)"  # faulthandler
    r"|(?:srun|slurmstepd|sbatch|salloc):"
    r")"
    r"|\d{4}-\d\d-\d\d[ T_]\d\d:\d\d:\d\d"  # an ISO date and time anywhere
    r"|\b\d\d:\d\d:\d\d\b"  # a time of day
    r"|\[(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL)\]| - (?:INFO|WARNING|ERROR|DEBUG) - "
    r"|NCCL (?:INFO|WARN)|Watchdog caught|ProcessGroup(?:NCCL|Gloo)|torch\.distributed"
    r"|ChildFailedError|torchrun",
    re.MULTILINE,
)
_CONTROL = re.compile("[\x00-\x08\x0e-\x1a\x1c-\x1f\x7f\ufffd]")


def sniff_bytes(head: bytes) -> str:
    """What a file is, from its first bytes: a dump (gzip, pickle, JSON, with or without a
    UTF-8 byte-order mark), py-spy stacks, a log (text with a log's structure), other text,
    binary, or empty."""
    if head[:3] == UTF8_BOM:
        head = head[3:]
    stripped = head.lstrip()
    if not stripped:
        return EMPTY
    if head[:2] == b"\x1f\x8b" or head[:1] == b"\x80" or stripped[:1] == b"{":
        return DUMP
    if _JSON_ARRAY.match(stripped):  # not `[nodeA:0]:`, the first line of a torchrun log
        return DUMP
    if OLD_PICKLE.match(head):
        return DUMP
    if b"\x00" in head:  # text lines, then zeros (a log with a hole, a sparse file): text
        text_part = head[: head.index(b"\x00")]
        if b"\n" not in text_part or sniff_bytes(text_part) not in (LOG, STACKS):
            return BINARY
        head = text_part
    text = ANSI.sub("", head.decode("utf-8", "replace"))
    if len(_CONTROL.findall(text[:-4])) * 10 > max(len(text), 1):  # a cut last char is fine
        return BINARY
    if _STACKS_START.search(text):
        return STACKS
    return LOG if _LOG_STRUCTURE.search(text) else TEXT


def open_untrusted(path: str | Path) -> int:
    """A read-only descriptor of a regular file, opened without following a link or
    blocking on a FIFO; OSError otherwise."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
    flags |= getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(path, flags)
    try:
        if not _is_regular(fd):
            raise OSError(errno.EINVAL, "not a regular file")
    except BaseException:
        os.close(fd)
        raise
    return fd


def _is_regular(fd: int) -> bool:
    return stat.S_ISREG(os.fstat(fd).st_mode)


def sniff(path: str | Path) -> str:
    """`sniff_bytes` of the file's first SNIFF_BYTES bytes (UNREADABLE if it cannot be read)."""
    try:
        fd = open_untrusted(path)
    except OSError:
        return UNREADABLE
    try:
        return sniff_bytes(os.read(fd, SNIFF_BYTES))
    except OSError:
        return UNREADABLE
    finally:
        os.close(fd)


@dataclass
class LineStats:
    """What reading a file skipped or cut."""

    lines: int = 0
    truncated: bool = False
    binary: int = 0
    cut: int = 0


def read_lines(
    path: str | Path,
    stats: LineStats | None = None,
    max_bytes: int | None = None,
    max_line: int | None = None,
) -> Iterator[tuple[int, str]]:
    """(line number, text) of a text file, within budgets (see the module docstring).

    Line numbers count from 1; in the tail of a file larger than `max_bytes` they are 0
    (unknown without reading the middle). Escape sequences are removed; binary lines are
    skipped.
    """
    limits = budgets()
    max_bytes = limits.max_log_bytes if max_bytes is None else max_bytes
    max_line = limits.max_log_line if max_line is None else max_line
    stats = stats if stats is not None else LineStats()
    fd = open_untrusted(path)
    try:
        size = os.fstat(fd).st_size
        if size <= max_bytes:
            yield from _lines(fd, size, 1, stats, max_line, skip_first=False)
            return
        stats.truncated = True
        head = max_bytes // HEAD_SHARE
        yield from _lines(fd, head, 1, stats, max_line, skip_first=False)
        os.lseek(fd, size - (max_bytes - head), os.SEEK_SET)
        yield from _lines(fd, max_bytes - head, 0, stats, max_line, skip_first=True)
    finally:
        os.close(fd)


def _lines(
    fd: int, budget: int, first: int, stats: LineStats, max_line: int, skip_first: bool
) -> Iterator[tuple[int, str]]:
    """Lines of the next `budget` bytes of fd. A line longer than `max_line` keeps its first
    `max_line` bytes; the rest is read and dropped, never held."""
    number = first
    pending = b""  # the start of a line the previous chunk did not end (at most max_line)
    dropping = skip_first  # the tail starts mid-line: drop up to the first newline
    left = budget
    while left > 0:
        chunk = os.read(fd, min(CHUNK, left))
        if not chunk:
            break
        left -= len(chunk)
        pieces = chunk.split(b"\n")
        for piece in pieces[:-1]:  # each ends a line
            if dropping:
                dropping = False
                if skip_first:
                    skip_first = False
                    pending = b""
                    continue
                raw = pending
            else:
                raw = pending + piece
                if len(raw) > max_line:
                    raw = raw[:max_line]
                    stats.cut += 1
            pending = b""
            stats.lines += 1
            text = _clean(raw, stats)
            if text is not None:
                yield number, text
            if number:
                number += 1
        last = pieces[-1]
        if not dropping:
            pending += last
            if len(pending) > max_line:  # the line goes on: keep its head, drop the rest
                pending = pending[:max_line]
                stats.cut += 1
                dropping = True
    if pending and not skip_first:
        stats.lines += 1
        text = _clean(pending, stats)
        if text is not None:
            yield number, text


def _clean(raw: bytes, stats: LineStats) -> str | None:
    """A line as text: None (and counted) when it is binary; escape sequences removed."""
    if b"\x00" in raw:
        stats.binary += 1
        return None
    text = raw.decode("utf-8", "replace")
    if text.isprintable():  # the common case, checked in C
        return text
    if "\x1b" in text:
        text = ANSI.sub("", text)
    if len(_CONTROL.findall(text)) * 4 > max(len(text), 8):
        stats.binary += 1
        return None
    return text
