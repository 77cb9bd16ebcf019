"""Parse `py-spy dump` output: many processes one after another, `--native` frames too.

py-spy (src/dump.rs, print_traces) writes per process `Process <pid>: <command line>`,
`Python v<version> (<executable>)`, a blank line, then per thread `Thread <id> (<status>)`
with `: "<name>"` when the thread has a name, each followed by its frames innermost first,
`    <function> (<file>:<line>)` (`    <function> (<file>)` without a line); `--locals` adds
indented `Arguments:`/`Locals:` blocks of `<name>: <repr>` lines (src/dump.rs,
print_traces), of which the ints held in RANK, LOCAL_RANK, rank, local_rank and global_rank
are kept: a worker's own statement of its rank. `--native` interleaves C/C++ frames in the
same shape. Nothing else in it names the rank: `frtrace collect` (and `frtrace live`) write
`# frtrace-collect rank=R local_rank=L host=H pid=P` on the line before each process, and a
labelled block may hold faulthandler's format instead (`Thread 0x<id> (most recent call
first):`, `  File "<file>", line <n> in <function>`; CPython Python/traceback.c); without a
label, frtrace.evidence.gather ties processes to ranks by pid and by host.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from pathlib import Path

from frtrace.dumps.text import LineStats, read_lines
from frtrace.evidence.logs import FAULT_FRAME, FAULT_THREAD, LogReadError, cut, host_from_path
from frtrace.evidence.records import (
    MAX_FRAMES,
    InputFile,
    Label,
    ProcessStack,
    PyFrame,
    ThreadStack,
    Where,
)

MAX_PROCESSES = 100_000  # per file
MAX_THREADS = 256  # per process

_LABEL = re.compile(r"^# frtrace-collect (?P<fields>.*)$")
_FIELD = re.compile(r"(?P<key>rank|local_rank|host|pid)=(?P<value>\S{1,256})")
_PROCESS = re.compile(r"^Process (?P<pid>\d{1,12}): ?(?P<cmd>.*)$")
_PYTHON = re.compile(r"^Python v(?P<version>\S{1,64})")
_THREAD = re.compile(
    r'^Thread (?P<tid>\S{1,64}) \((?P<status>[^)]{0,32})\)(?:: "(?P<name>.{0,256})")?\s*$'
)
_FRAME = re.compile(
    r"^ {4}(?P<fn>\S.{0,512}?) \((?P<file>[^()]{0,1024}?)(?::(?P<line>\d{1,9}))?\)\s*$"
)
_LOCAL = re.compile(
    r"^ {12}(?P<name>RANK|LOCAL_RANK|rank|local_rank|global_rank): (?P<value>\d{1,7})$"
)


@dataclass
class ParsedStacks:
    """One py-spy file's processes."""

    input: InputFile
    host: str
    processes: list[ProcessStack] = field(default_factory=list)


def _int(value: str | None) -> int | None:
    return int(value) if value is not None and value.isdigit() and len(value) <= 12 else None


def parse_label(text: str) -> Label | None:
    """The fields of a `# frtrace-collect ...` line (None when it is not one)."""
    m = _LABEL.match(text)
    if m is None:
        return None
    fields = {f.group("key"): f.group("value") for f in _FIELD.finditer(m.group("fields"))}
    return Label(
        _int(fields.get("rank")),
        _int(fields.get("local_rank")),
        fields.get("host", ""),
        _int(fields.get("pid")),
    )


@dataclass
class _Building:
    pid: int | None
    cmdline: str
    where: Where
    label: Label | None
    python: str = ""
    source: str = "py-spy"
    threads: list[ThreadStack] = field(default_factory=list)
    thread: tuple[str, str, str] | None = None
    frames: list[PyFrame] = field(default_factory=list)
    thread_locals: list[tuple[str, int]] = field(default_factory=list)
    locals: list[list[tuple[str, int]]] = field(default_factory=list)  # per thread kept

    def close_thread(self) -> None:
        if self.thread is not None and len(self.threads) < MAX_THREADS:
            tid, status, name = self.thread
            self.threads.append(ThreadStack(tid, status, name, tuple(self.frames[:MAX_FRAMES])))
            self.locals.append(self.thread_locals)
        self.thread, self.frames, self.thread_locals = None, [], []

    def take(self, text: str) -> None:
        """One line of the process's block: its Python version, a thread's header, one of
        the thread's frames or one of its locals (within the budgets); anything else is
        skipped."""
        if (p := _PYTHON.match(text)) is not None:
            self.python = p.group("version")
        elif (t := _THREAD.match(text)) is not None:
            self.close_thread()
            self.thread = (t.group("tid"), t.group("status"), t.group("name") or "")
        elif (t := FAULT_THREAD.match(text)) is not None:
            self.close_thread()
            self.source = "faulthandler"
            main = "MainThread" if t.group("cur") == "Current thread" else ""
            self.thread = (t.group("tid"), "", main)
        elif self.thread is None or len(self.frames) >= 2 * MAX_FRAMES:
            return
        elif (f := _FRAME.match(text)) is not None:
            line = f.group("line")
            frame = PyFrame(cut(f.group("fn"), 200), cut(f.group("file"), 400), int(line or 0))
            python = [f for f in self.frames if not f.native]
            # `--native` frames: up to MAX_FRAMES before the innermost Python one (where a
            # collective waits in c10d), none after it (they crowd out the job's frames)
            if frame.native and (python or len(self.frames) >= MAX_FRAMES):
                return
            if not frame.native and len(python) >= MAX_FRAMES:
                return
            self.frames.append(frame)
        elif (f := FAULT_FRAME.match(text)) is not None:
            self.frames.append(
                PyFrame(cut(f.group("fn"), 200), cut(f.group("file"), 400), int(f.group("line")))
            )
        elif (v := _LOCAL.match(text)) is not None and len(self.thread_locals) < 64:
            self.thread_locals.append((v.group("name"), int(v.group("value"))))

    def finish(self, host: str) -> ProcessStack:
        """The process as read, on its label's host when the label names one, else `host`
        (the file's)."""
        self.close_thread()
        stack = ProcessStack(
            self.pid,
            cut(self.cmdline),
            self.python,
            tuple(self.threads),
            (self.label.host if self.label and self.label.host else host),
            self.where,
            self.label,
            source=self.source,
        )
        if stack.main is None:
            return stack
        held = self.locals[self.threads.index(stack.main)]
        return replace(stack, locals=tuple(reversed(held)))  # the outermost frame's first


def parse_pyspy(
    path: Path, root: Path | None = None, shared: frozenset[str] = frozenset()
) -> ParsedStacks:
    """Every process of one py-spy output file, within the budgets."""
    host = host_from_path(path, root, shared)
    out = ParsedStacks(InputFile(str(path), "stacks", host, 0), host)
    stats = LineStats()
    label: Label | None = None
    current: _Building | None = None
    try:
        for number, text in read_lines(path, stats):
            if text.startswith("#"):
                got = parse_label(text)
                if got is not None:
                    _keep(out, current)
                    current, label = None, got
                continue
            m = _PROCESS.match(text)
            if m:
                _keep(out, current)
                where = Where(str(path), number)
                current = _Building(int(m.group("pid")), m.group("cmd"), where, label)
                label = None
            elif current is None and label is not None and FAULT_THREAD.match(text):
                # a labelled faulthandler dump: the label names its process
                current = _Building(label.pid, "", Where(str(path), number), label)
                label = None
                current.take(text)
            elif current is not None:
                current.take(text)
    except OSError as exc:
        raise LogReadError(f"cannot read ({exc.strerror or exc})") from exc
    _keep(out, current)
    out.input = InputFile(
        str(path), "stacks", host, stats.lines, stats.truncated, stats.binary, stats.cut
    )
    return out


def _keep(out: ParsedStacks, current: _Building | None) -> None:
    """File the process just read, up to MAX_PROCESSES per file (a label or the next
    process header ends it, as does the file's end)."""
    if current is not None and len(out.processes) < MAX_PROCESSES:
        out.processes.append(current.finish(out.host))
