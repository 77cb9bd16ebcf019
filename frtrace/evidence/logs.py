"""Parse a job's logs (torchrun's per-node output, per-rank files) into typed records.

Which line is whose:
- torchrun's `--tee` copies every worker line with the header `[<role><local_rank>]:`
  (torch/distributed/elastic/multiprocessing/tail_log.py, TailLog.start); with
  `--role $(hostname -s):` that reads `[nodeB:1]:`, without `--role` `[default1]:`. The
  number is the LOCAL rank. A role ending in `:` is taken as the host name.
- A worker's uncaught exception is written with `[rank<global>]: ` before every line
  (torch/distributed/distributed_c10d.py, init_process_group: `_distributed_excepthook`);
  torch's C++ log lines carry `[rank<global>]:` as well.
- torchelastic's failure summary names each failed worker's global and local rank, exit
  code, pid and signal (below); it is written by the node's agent, so its file is the host.

What is read (each format cited where its pattern is defined below): NCCL's watchdog timeout
and its group status, gloo's timeout and connection errors, Python tracebacks, the
torchelastic summary, NCCL WARN lines. Everything else is skipped. The file is streamed
within budgets (frtrace.dumps.text.read_lines).
"""

from __future__ import annotations

import os
import re
import signal as signals
from collections import deque
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, NamedTuple

from frtrace.dumps.text import LineStats, read_lines
from frtrace.evidence.records import (
    COMM_ERROR,
    MAX_FRAMES,
    PEER_LOST,
    TIMEOUT,
    Exited,
    InputFile,
    PyFrame,
    Raised,
    Wait,
    Warned,
    Where,
)

MAX_TEXT = 300  # characters kept of a message read from a log

# torchrun's header, then the excepthook's / C++ logging's global rank (`[rank3]:` alone is
# the latter, not a torchrun role named "rank").
_RANK_TAG = re.compile(r"\[rank(?P<rank>\d{1,7})\]:\s?")
_HEAD = re.compile(
    r"(?:(?!\[rank\d{1,7}\]:)\[(?P<role>[^\[\]\s]{0,128}?)(?P<local>\d{1,6})\]:)?"
    r"(?:\[rank(?P<rank>\d{1,7})\]:\s?)?"
)

# Python's traceback (traceback.format_exception).
_TB_START = "Traceback (most recent call last):"
_TB_FRAME = re.compile(
    r'^\s{2}File "(?P<file>[^"]{0,1024})", line (?P<line>\d{1,9}), in (?P<fn>.{1,256})$'
)
_EXC_LINE = re.compile(r"^(?P<type>[A-Za-z_][\w.]{0,200}?)(?::\s?(?P<msg>.*))?$")

# NCCL's watchdog (torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp): WorkNCCL::checkTimeout
# logs `<WorkNCCL::logPrefix() = "[Rank <rank>] ">Watchdog caught collective operation
# timeout: <work> ran for <ms> milliseconds before timing out.`, where operator<<(WorkNCCL)
# writes `WorkNCCL(SeqNum=<seq>, OpType=<opTypeToString>, NumelIn=<n>, NumelOut=<n>,
# Timeout(ms)=<ms>)`. The `[Rank N]` there is fixed per process (a static in logPrefix):
# it is not reliably the rank in the group that timed out.
_WATCHDOG = re.compile(
    r"(?:\[Rank (?P<grank>\d{1,7})\] )?Watchdog caught collective operation timeout: "
    r"WorkNCCL\(SeqNum=(?P<seq>\d{1,12}), OpType=(?P<op>\w{1,40}), NumelIn=(?P<nin>\d{1,20}), "
    r"NumelOut=(?P<nout>\d{1,20}), Timeout\(ms\)=(?P<timeout>\d{1,12})\)"
)
# WorkNCCL::checkAndSetException, for an NCCL error rather than a timeout: `<logPrefix()>
# Collective <work> raised the following async exception: <message>`.
_ASYNC_ERROR = re.compile(
    r"Collective WorkNCCL\(SeqNum=(?P<seq>\d{1,12}), OpType=(?P<op>\w{1,40}),.{0,200}?\) "
    r"raised the following async exception: (?P<msg>.*)"
)
# ProcessGroupNCCL::Watchdog::runLoop: `<logPrefix()> failure detected by watchdog at work
# sequence id: <seq> PG status: last enqueued work: <n>, last completed work: <n>`, where
# ProcessGroupNCCL::createLogPrefix is `[PG ID <id> PG GUID <uid>(<desc>) Rank <rank>] `
# (without `(<desc>)` when the group has none).
_WATCHDOG_STATUS = re.compile(
    r"\[PG ID (?P<pgid>\d{1,9}) PG GUID (?P<uid>[^\s()\[\]]{1,256})(?:\((?P<desc>[^()]{0,256})\))?"
    r" Rank (?P<grank>\d{1,7})\]\s+failure detected by watchdog at work sequence id: "
    r"(?P<seq>\d{1,12}) PG status: last enqueued work: (?P<enq>-?\d{1,12}), last completed "
    r"work: (?P<done>-?\d{1,12})"
)
# gloo (third_party/gloo/gloo/transport/tcp/unbound_buffer.cc, UnboundBuffer::waitRecv and
# waitSend): `Timed out waiting <ms>ms for recv|send operation to complete`.
_GLOO_TIMEOUT = re.compile(r"Timed out waiting (?P<ms>\d{1,12})ms for (?P<dir>recv|send) operation")
# gloo/transport/tcp/pair.cc, Pair::read: `Connection closed by peer <addr>` (EOF: the peer
# went away) and `Read error <addr>: <strerror>` (ECONNRESET when it died).
_GLOO_PEER = re.compile(r"Connection closed by peer|Read error \S{0,300}: Connection reset by peer")
_COMM_TYPES = ("DistBackendError", "DistNetworkError", "DistStoreError")

# torchelastic's summary (torch/distributed/elastic/multiprocessing/errors/__init__.py,
# ChildFailedError.format_msg with _MSG_FORMAT_TEMPLATE and _FAILURE_FORMAT_TEMPLATE): a
# `Failures:` list and a `Root Cause (first observed failure):` block of entries
# `[<idx>]:` / `  host      : <host>` / `  rank      : <rank> (local_rank: <local>)` /
# `  exitcode  : <code> (pid: <pid>)` (newer: then ` (<SIGNAME>)` for a signal) /
# `  traceback : Signal <n> (<SIGNAME>) received by PID <pid>` for a signal.
_SUM_ENTRY = re.compile(r"^\[(?P<idx>\d{1,9})\]:\s*$")
_SUM_HOST = re.compile(r"^\s+host\s+:\s*(?P<host>\S{1,256})\s*$")
_SUM_RANK = re.compile(r"^\s+rank\s+:\s*(?P<rank>\d{1,9}) \(local_rank: (?P<local>\d{1,9})\)")
_SUM_EXIT = re.compile(
    r"^\s+exitcode\s+:\s*(?P<code>-?\d{1,9}) \(pid: (?P<pid>\d{1,12})\)"
    r"(?:\s*\((?P<sig>SIG\w{1,20})\))?"
)
_SUM_SIGNAL = re.compile(r"^\s+traceback\s+:\s*Signal \d{1,3} \((?P<sig>SIG\w{1,20})\)")
_SUM_ROOT = "Root Cause (first observed failure):"

# NCCL's own output (nccl src/debug.cc, ncclDebugLog): `<host>:<pid>:<tid> [<dev>]
# <file>:<line> NCCL WARN <message>`.
_NCCL_WARN = re.compile(
    r"(?P<host>[\w.\-]{1,256}):(?P<pid>\d{1,12}):\d{1,12} \[\d{1,6}\] \S{0,300} "
    r"NCCL WARN (?P<msg>.*)"
)

# Per-rank files: `rank3.log`, `worker_rank-3.out`.
_RANK_FILE = re.compile(r"(?:^|[_\-.])rank[_\-]?(?P<rank>\d{1,7})$", re.IGNORECASE)
_LOG_SUFFIXES = (".gz", ".log", ".out", ".err", ".txt", ".stdout", ".stderr", ".pyspy")

# NCCL's OpType names (torch/csrc/distributed/c10d/ProcessGroup.cpp, opTypeToString) as the
# Python calls that issue them.
OP_NAMES = {
    "BROADCAST": "broadcast",
    "ALLREDUCE": "all_reduce",
    "ALLREDUCE_COALESCED": "all_reduce_coalesced",
    "REDUCE": "reduce",
    "ALLGATHER": "all_gather",
    "_ALLGATHER_BASE": "_allgather_base",
    "ALLGATHER_COALESCED": "all_gather_coalesced",
    "GATHER": "gather",
    "SCATTER": "scatter",
    "REDUCE_SCATTER": "reduce_scatter",
    "_REDUCE_SCATTER_BASE": "_reduce_scatter_base",
    "ALLTOALL_BASE": "all_to_all_single",
    "ALLTOALL": "all_to_all",
    "SEND": "send",
    "RECV": "recv",
    "RECVANYSOURCE": "recv_any_source",
    "BARRIER": "barrier",
    "COALESCED": "coalesced",
}


def _maybe(line: str) -> bool:
    """Whether a line may say more than who wrote it (a rank tag, a traceback's start, NCCL's
    watchdog or WARN, torchelastic's summary); the others are only glanced at. Substring
    tests, faster than one regex of alternatives on the millions of lines of a large log."""
    return (
        "[rank" in line
        or "Traceback" in line
        or "atchdog" in line
        or "exception" in line
        or "NCCL WARN" in line
        or "Root Cause" in line
        or (line[:1] == "[" and line.rstrip().endswith("]:"))
    )


MAX_RECORDS = 4096  # records of each kind kept per file (the last ones)


def _bounded() -> deque[Any]:
    return deque(maxlen=MAX_RECORDS)


class Speaker(NamedTuple):
    """Who wrote a line: host, local rank (torchrun's header), global rank (a rank tag)."""

    host: str
    local: int | None
    rank: int | None


@dataclass
class ParsedLog:
    """One log file's records, each with who wrote it."""

    input: InputFile
    host: str  # the file's node: its torchrun role, else its folder or name
    # the last MAX_RECORDS of each: a log of a million failures stays bounded
    waits: deque[tuple[Speaker, Wait]] = field(default_factory=lambda: _bounded())
    raised: deque[tuple[Speaker, Raised]] = field(default_factory=lambda: _bounded())
    exits: deque[tuple[Speaker, Exited]] = field(default_factory=lambda: _bounded())
    warnings: deque[tuple[Speaker, Warned]] = field(default_factory=lambda: _bounded())
    slots: dict[tuple[str, int], int] = field(default_factory=dict)  # (host, local) -> rank
    speakers: set[Speaker] = field(default_factory=set)
    file_rank: int | None = None  # a per-rank file: the rank in its name


def host_from_path(path: Path, root: Path | None) -> str:
    """The node a file came from, by where it lies: its sub-folder of `root` (one folder per
    node), else its name without the usual suffixes (`nodeB.log` -> nodeB)."""
    if root is not None and not same_folder(path.parent, root) and path.parent.name:
        return path.parent.name
    name = path.name
    changed = True
    while changed:
        changed = False
        for suffix in _LOG_SUFFIXES:
            if name.lower().endswith(suffix) and len(name) > len(suffix):
                name, changed = name[: -len(suffix)], True
    return name


def same_folder(a: Path, b: Path) -> bool:
    """The same folder, however each path was spelled (relative or not)."""
    return os.path.abspath(a) == os.path.abspath(b)


def rank_from_log_name(path: Path) -> int | None:
    """The rank of a per-rank log file named like `rank3.log`, else None."""
    stem = host_from_path(path, None)
    m = _RANK_FILE.search(stem)
    return int(m.group("rank")) if m else None


def cut(text: str, limit: int = MAX_TEXT) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _signal_name(code: int) -> str:
    if code >= 0:
        return ""
    try:
        return signals.Signals(-code).name
    except ValueError:
        return f"signal {-code}"


@dataclass
class _Traceback:
    frames: list[PyFrame] = field(default_factory=list)
    start: int = 0


@dataclass
class _Summary:
    """torchelastic's summary entry being read."""

    root: bool = False
    host: str = ""
    rank: int | None = None
    local: int | None = None
    code: int | None = None
    pid: int | None = None
    sig: str = ""
    line: int = 0


class _Parser:
    def __init__(self, path: Path, root: Path | None) -> None:
        self.path = str(path)
        self.file_host = host_from_path(path, root)
        self.out = ParsedLog(InputFile(self.path, "log", self.file_host, 0), self.file_host)
        self.tracebacks: dict[Speaker, _Traceback] = {}
        self.summary: _Summary | None = None
        self.root_next = False
        self.roles: dict[str, int] = {}
        self.speakers: dict[tuple[str, int | None, int | None], Speaker] = {}
        self.heads: set[str] = set()  # torchrun headers already noted by `glance`

    def host_of(self, role: str) -> str:
        if role.endswith(":") and len(role) > 1:
            return role[:-1]
        return self.file_host

    def glance(self, line: str) -> None:
        """Note the writer of a line that says nothing else (one dict lookup per line)."""
        end = line.find("]:", 0, 160) + 2 if line[:1] == "[" else 0
        head = line[:end]
        if head in self.heads:
            return
        self.heads.add(head)
        m = _HEAD.match(head)
        if m is not None and m.group("local") is not None:
            role = m.group("role")
            self.roles[role] = self.roles.get(role, 0) + 1
            self.speaker(role, int(m.group("local")), None)

    def speaker(self, role: str, local: int | None, rank: int | None) -> Speaker:
        """The writer of a line (made once per distinct header: most lines share a few)."""
        key = (role, local, rank)
        got = self.speakers.get(key)
        if got is None:
            got = self.speakers[key] = Speaker(self.host_of(role), local, rank)
            if local is not None or rank is not None:
                self.out.speakers.add(got)
                if local is not None and rank is not None:
                    self.out.slots[(got.host, local)] = rank
        return got

    def feed(self, number: int, line: str) -> None:
        if not self.tracebacks and self.summary is None and not _maybe(line):
            self.glance(line)  # most lines: nothing to read but who wrote them
            return
        rest = line
        role, local, rank = "", None, None
        if line[:1] == "[":
            m = _HEAD.match(line)
            if m is not None and m.end() and not (m.group("local") and _SUM_ENTRY.match(line)):
                if m.group("local") is not None:
                    role, local = m.group("role"), int(m.group("local"))
                    self.roles[role] = self.roles.get(role, 0) + 1
                if m.group("rank") is not None:
                    rank = int(m.group("rank"))
                rest = line[m.end() :]
        if "\r" in rest:  # a progress bar's updates: read on as one line
            rest = rest.replace("\r", " ")
        speaker = self.speaker(role, local, rank)
        if local is None and rank is None and self._summary_line(rest, number):
            return
        if "atchdog" in rest or "async exception" in rest:
            self._watchdog(rest, speaker, Where(self.path, number))
        elif speaker in self.tracebacks or rest.startswith(_TB_START):
            self._traceback(rest, speaker, Where(self.path, number))
        elif "NCCL WARN" in rest:
            w = _NCCL_WARN.search(rest)
            if w:
                where = Where(self.path, number)
                warned = Warned(w.group("host"), int(w.group("pid")), cut(w.group("msg")), where)
                self.out.warnings.append((speaker, warned))

    # --- NCCL's watchdog ---

    def _watchdog(self, text: str, speaker: Speaker, where: Where) -> None:
        if speaker.rank is None:  # a rank tag after a progress bar, mid-line
            tags = list(_RANK_TAG.finditer(text))
            if tags:
                speaker = speaker._replace(rank=int(tags[-1].group("rank")))
                self.out.speakers.add(speaker)
        m = _WATCHDOG.search(text)
        if m:
            op = m.group("op")
            wait = Wait(
                TIMEOUT,
                OP_NAMES.get(op, op.lower()),
                where,
                seq=int(m.group("seq")),
                timeout_ms=int(m.group("timeout")),
                group_rank=int(m.group("grank")) if m.group("grank") else None,
                detail=cut(text[m.start() :]),
            )
            self.out.waits.append((speaker, wait))
            return
        a = _ASYNC_ERROR.search(text)
        if a:
            op = a.group("op")
            error = Wait(
                COMM_ERROR,
                OP_NAMES.get(op, op.lower()),
                where,
                seq=int(a.group("seq")),
                detail=cut(a.group("msg")),
            )
            self.out.waits.append((speaker, error))
            return
        s = _WATCHDOG_STATUS.search(text)
        if s is None:
            return
        seq = int(s.group("seq"))
        found = Wait(COMM_ERROR, "", where, seq=seq)  # no timeout line before it: an error
        index = None
        for i in range(len(self.out.waits) - 1, -1, -1):  # the timeout line just before
            who, wait = self.out.waits[i]
            if who == speaker and wait.seq == seq and not wait.pg_name:
                found, index = wait, i
                break
        found = replace(
            found,
            pg_name=s.group("uid"),
            pg_desc=s.group("desc") or "",
            group_rank=int(s.group("grank")),
            last_enqueued=int(s.group("enq")),
            last_completed=int(s.group("done")),
        )
        if index is None:
            self.out.waits.append((speaker, found))
        else:
            self.out.waits[index] = (speaker, found)

    # --- Python tracebacks ---

    def _traceback(self, text: str, speaker: Speaker, where: Where) -> None:
        if text.startswith(_TB_START):
            self.tracebacks[speaker] = _Traceback(start=where.line)
            return
        tb = self.tracebacks.get(speaker)
        if tb is None:
            return
        f = _TB_FRAME.match(text)
        if f:
            frame = PyFrame(f.group("fn").strip(), f.group("file"), int(f.group("line")))
            tb.frames.append(frame)
            if len(tb.frames) > 4 * MAX_FRAMES:  # keep the innermost ones
                del tb.frames[:MAX_FRAMES]
            return
        if not text.strip() or text.startswith(" "):
            return  # a source line, carets, a blank line
        e = _EXC_LINE.match(text.rstrip())
        del self.tracebacks[speaker]
        if e is None:
            return
        self._exception(e.group("type"), e.group("msg") or "", tb, speaker, where)

    def _exception(
        self, kind: str, message: str, tb: _Traceback, speaker: Speaker, where: Where
    ) -> None:
        frames = tuple(reversed(tb.frames))  # innermost first
        at = Where(where.file, tb.start or where.line)
        timeout = _GLOO_TIMEOUT.search(message)
        how = ""
        if timeout or "Watchdog caught collective operation timeout" in message:
            how = TIMEOUT
        elif _GLOO_PEER.search(message):
            how = PEER_LOST
        elif kind.rsplit(".", 1)[-1] in _COMM_TYPES:
            how = COMM_ERROR
        if not how:
            raised = Raised(kind, cut(message), frames[:MAX_FRAMES], at)
            self.out.raised.append((speaker, raised))
            return
        op, call_site = collective_of(frames)
        wait = Wait(
            how,
            op,
            at,
            timeout_ms=int(timeout.group("ms")) if timeout else None,
            call_site=call_site,
            detail=cut(f"{kind}: {message}"),
        )
        self.out.waits.append((speaker, wait))

    # --- torchelastic's summary ---

    def _summary_line(self, text: str, number: int) -> bool:
        if text.startswith(_SUM_ROOT):
            self._close_summary()
            self.root_next = True
            return True
        if _SUM_ENTRY.match(text):
            self._close_summary()
            self.summary = _Summary(root=self.root_next, line=number)
            self.root_next = False
            return True
        s = self.summary
        if s is None:
            return False
        if text.startswith(("---", "===")) or not text.startswith(" "):
            self._close_summary()
            return text.startswith(("---", "==="))
        if (m := _SUM_HOST.match(text)) is not None:
            s.host = m.group("host")
        elif (m := _SUM_RANK.match(text)) is not None:
            s.rank, s.local = int(m.group("rank")), int(m.group("local"))
        elif (m := _SUM_EXIT.match(text)) is not None:
            s.code, s.pid = int(m.group("code")), int(m.group("pid"))
            s.sig = m.group("sig") or s.sig
        elif (m := _SUM_SIGNAL.match(text)) is not None:
            s.sig = s.sig or m.group("sig")
        return True

    def _close_summary(self) -> None:
        s, self.summary = self.summary, None
        if s is None or s.rank is None or s.code is None:
            return
        sig = s.sig or _signal_name(s.code)
        exited = Exited(s.code, sig, s.pid, s.host, s.root, Where(self.path, s.line))
        self.out.exits.append((Speaker("", s.local, s.rank), exited))

    def finish(self, stats: LineStats) -> ParsedLog:
        self._close_summary()
        host = self.file_host
        named = {r: n for r, n in self.roles.items() if r.endswith(":") and len(r) > 1}
        if named:  # the file's node: its most frequent `--role host:`
            host = max(named, key=lambda r: named[r])[:-1]
        out = self.out
        out.host = host
        out.exits = deque(((Speaker(host, s.local, s.rank), e) for s, e in out.exits), MAX_RECORDS)
        if not out.speakers and not out.exits:
            out.file_rank = rank_from_log_name(Path(self.path))
            if out.file_rank is not None and host == host_from_path(Path(self.path), None):
                host = out.host = ""  # `rank3.log` names a rank, not a node
        out.input = InputFile(
            self.path, "log", host, stats.lines, stats.truncated, stats.binary, stats.cut
        )
        return out


def collective_of(frames: tuple[PyFrame, ...]) -> tuple[str, PyFrame | None]:
    """(the collective a stack is in, the job's frame that called it), from frames innermost
    first: the innermost function of torch/distributed/distributed_c10d.py is the op."""
    op = ""
    seen_torch = False
    for frame in frames:
        path = frame.file.replace("\\", "/")
        if "torch/distributed/" in path:
            seen_torch = True
            if not op and path.endswith("distributed_c10d.py"):
                op = frame.function.rsplit(".", 1)[-1]
            continue
        if seen_torch and "/torch/" not in path and not path.startswith("torch/"):
            return op, frame
        if not seen_torch and frame.file.endswith(".py"):
            return "", None  # innermost Python frame outside torch.distributed
    return op, None


def parse_log(path: Path, root: Path | None = None) -> ParsedLog:
    """Every record of one log file, within the budgets (an unreadable file reads as empty)."""
    parser = _Parser(path, root)
    stats = LineStats()
    try:
        for number, line in read_lines(path, stats):
            parser.feed(number, line)
    except OSError as exc:
        raise LogReadError(f"cannot read ({exc.strerror or exc})") from exc
    return parser.finish(stats)


class LogReadError(Exception):
    """A log or stacks file could not be read (its reason is the message)."""
