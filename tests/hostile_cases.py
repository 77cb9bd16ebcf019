"""A corpus of hostile and broken inputs, and a harness that runs the CLI on them.

Each Case writes one bad input (a file, a link, a FIFO, an odd name, or odd options) beside two
good dumps (ranks 0 and 1) and says what must happen: which file is skipped and why, whether it
is analyzed instead, the exit status. `run_cli` runs frtrace in a subprocess under an
address-space limit and a timeout, so a case that would eat memory or hang fails instead of
taking the machine down. Used by tests/test_hostile.py and scripts/hostile_report.py.
"""

from __future__ import annotations

import gzip
import json
import os
import pickle
import re
import resource
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from builders import REPO, nccl_dump, nccl_entry

from frtrace.report.fmt import safe

MARKER_NAME = "pwned"  # a pickle that ran code would create this file
RAW_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
MEMORY_LIMIT = 1536 << 20  # address space of the CLI and its workers
TIME_LIMIT = 20.0  # seconds; the acceptance goal is under 10


def dump(entries: list[dict[str, Any]] | None = None, **top: Any) -> dict[str, Any]:
    """A healthy two-rank dump (three all_reduces) with `top` keys replaced."""
    data = nccl_dump(0, 2, entries)
    data["pg_status"]["0"] = dict.fromkeys(
        ("last_enqueued_collective", "last_started_collective", "last_completed_collective"), 3
    )
    data.update(top)
    return data


def with_entry(**fields: Any) -> dict[str, Any]:
    """A healthy dump whose second entry has `fields` replaced."""
    entries = [nccl_entry(i, i + 1) for i in range(3)]
    entries[1].update(fields)
    return dump(entries)


def pickled(data: Any) -> bytes:
    return pickle.dumps(data, protocol=2)


# ---- raw pickle opcodes, for what pickle.dumps will not write ---------------------------------


def _text(value: str) -> bytes:
    raw = value.encode()
    return b"X" + len(raw).to_bytes(4, "little") + raw


def dict_with_key(key_ops: bytes) -> bytes:
    """{'version': '2.10', 'entries': [], <key built by key_ops>: 1} as a protocol-2 pickle."""
    return (
        b"\x80\x02}"
        + _text("version")
        + _text("2.10")
        + b"s"
        + _text("entries")
        + b"]s"
        + key_ops
        + b"K\x01s."
    )


def laughs_tuple(levels: int) -> bytes:
    """Opcodes of t_n = (t_{n-1}, t_{n-1}) via the memo: 2**levels leaves in a few bytes."""
    ops = bytearray(b"K\x01\x85q\x00")  # (1,) -> memo 0
    for i in range(1, levels + 1):
        ops += b"0h" + bytes([i - 1]) + b"h" + bytes([i - 1]) + b"\x86q" + bytes([i])
    return bytes(ops)


def laughs_list(levels: int) -> Any:
    """l_n = [l_{n-1}, l_{n-1}]: pickle.dumps shares it through the memo (a few KB)."""
    node: Any = [0, 0]
    for _ in range(levels):
        node = [node, node]
    return node


def laughs_compared() -> dict[str, Any]:
    """Two entries of one call site whose sizes are equal but distinct shared structures:
    comparing them walks 2**40 leaves, until the parse's CPU budget stops it."""
    entries = [nccl_entry(i, i + 1) for i in range(3)]
    entries[1]["input_sizes"] = laughs_list(40)
    entries[2]["input_sizes"] = laughs_list(40)
    entries[2]["collective_seq_id"] = 2
    return dump(entries)


def global_reduce(marker: Path) -> bytes:
    command = f"touch {marker}"
    return b"\x80\x02cposix\nsystem\nq\x00" + _text(command) + b"\x85R."


def stack_global(marker: Path) -> bytes:
    """Protocol 4 STACK_GLOBAL of builtins.exec, called with code that touches the marker."""
    code = f"open({str(marker)!r}, 'w').close()"
    return (
        b"\x80\x04\x95\x00\x00\x00\x00\x00\x00\x00\x00"
        + b"\x8c\x08builtins\x8c\x04exec\x93"
        + b"\x8c"
        + bytes([len(code)])
        + code.encode()
        + b"\x85R."
    )


def global_inside_entry(marker: Path) -> bytes:
    """{'version': '2.10', 'entries': [{'frames': os.system(...)}]}."""
    call = global_reduce(marker)[2:-1]  # the REDUCE expression without PROTO and STOP
    return (
        b"\x80\x02}"
        + _text("version")
        + _text("2.10")
        + b"s"
        + _text("entries")
        + b"(}"
        + _text("frames")
        + call
        + b"sls."
    )


def gzip_bomb() -> bytes:
    """300 MiB of zeros (after a pickle header) in about 300 KB."""
    import zlib

    packer = zlib.compressobj(1, zlib.DEFLATED, 31)
    chunk = bytes(16 << 20)
    parts = [packer.compress(b"\x80\x02")]
    parts += [packer.compress(chunk) for _ in range(19)]
    parts.append(packer.flush())
    return b"".join(parts)


# ---- the cases -----------------------------------------------------------------------------


Build = Callable[[Path, str], None]  # (folder, file name)


@dataclass
class Case:
    """One hostile input and what frtrace must do with it."""

    name: str
    kind: str  # pickle, bomb, fs, types, cli
    build: Build  # writes the bad input into the folder (the good dumps are already there)
    file: str = ""  # the bad file's name
    skipped: dict[str, str] = field(default_factory=dict)  # file name -> reason substring
    analyzed: list[int] = field(default_factory=list)  # extra ranks that must load
    args: tuple[str, ...] = ()
    status: int = 0
    stderr: str = ""  # substring of stderr
    batch: bool = True  # may share one CLI run with other batchable cases
    check: Callable[[Path, Result], None] | None = None

    @property
    def rank(self) -> int:
        return int(self.file.rsplit("_", 1)[-1]) if self.file[-1:].isdigit() else -1


@dataclass
class Result:
    status: int
    stdout: str
    stderr: str
    wall: float
    peak_rss_mb: float

    @property
    def report(self) -> dict[str, Any]:
        return json.loads(self.stdout)


def write(path: Path, blob: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(blob)


def good_dumps(folder: Path) -> None:
    for rank in (0, 1):
        write(folder / f"trace_{rank}", pickled(dump()))


def _limits() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def run_cli(
    args: list[str], env: dict[str, str] | None = None, timeout: float = TIME_LIMIT
) -> Result:
    """frtrace in a subprocess under the memory limit; peak RSS is that of its largest process
    (ru_maxrss of the children, measured in a fresh helper so earlier runs do not count)."""
    probe = (
        "import resource, subprocess, sys, time, json\n"
        "t = time.monotonic()\n"
        "p = subprocess.run(sys.argv[1:], capture_output=True, timeout=%r)\n"
        "wall = time.monotonic() - t\n"
        "rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024\n"
        "sys.stdout.buffer.write(json.dumps([p.returncode, wall, rss]).encode() + b'\\n')\n"
        "sys.stdout.buffer.write(p.stdout)\n"
        "sys.stderr.buffer.write(p.stderr)\n"
    ).replace("%r", repr(timeout))
    full_env = dict(os.environ, NO_COLOR="1", PYTHONPATH=str(REPO))
    full_env.update(env or {})
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-c", probe, sys.executable, "-m", "frtrace", *args],
        capture_output=True,
        timeout=timeout + 5,
        env=full_env,
        preexec_fn=_limits,
    )
    head, _, out = proc.stdout.partition(b"\n")
    if proc.returncode != 0 or not head.startswith(b"["):
        raise AssertionError(f"harness failed: {proc.stderr.decode(errors='replace')[-2000:]}")
    status, wall, rss = json.loads(head)
    del started
    return Result(
        status,
        out.decode("utf-8", errors="surrogateescape"),
        proc.stderr.decode("utf-8", errors="surrogateescape"),
        wall,
        rss,
    )


def blob_case(name: str, kind: str, blob: bytes | Callable[[], bytes], reason: str | None) -> Case:
    """A bad file: skipped with `reason` (a substring), or analyzed when reason is None."""

    def build(folder: Path, file: str) -> None:
        write(folder / file, blob() if callable(blob) else blob)

    case = Case(name, kind, build)
    case.skipped = {"": reason} if reason is not None else {}
    case.analyzed = [] if reason is not None else [-1]
    return case


def _fifo(folder: Path, file: str) -> None:
    os.mkfifo(folder / file)


def _socket(folder: Path, file: str) -> None:
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(folder / file))
    sock.close()


def _symlink(target: str) -> Build:
    def build(folder: Path, file: str) -> None:
        os.symlink(target, folder / file)

    return build


def _subdir(folder: Path, file: str) -> None:
    (folder / "host9" / file).mkdir(parents=True)


def cases(marker: Path) -> list[Case]:
    """Every case; files that must not appear (code ran) are touched at `marker`."""
    out: list[Case] = []

    def add(name: str, kind: str, blob: Any, reason: str | None) -> None:
        out.append(blob_case(name, kind, blob, reason))

    # -- pickle attacks: code, memo tricks, nesting ------------------------------------------
    add("global_reduce", "pickle", global_reduce(marker), "refused")
    add("stack_global_exec", "pickle", stack_global(marker), "refused")
    add("global_inside_entry", "pickle", global_inside_entry(marker), "refused")
    add("persistent_id", "pickle", b"\x80\x02P1\n.", "persistent object: refused")
    # Protocol 0 (ASCII): the classic `cos\nsystem` call, and a good dump written that way.
    ascii_call = f"cos\nsystem\n(S'touch {marker}'\ntR.".encode()
    add("ascii_pickle_global", "pickle", ascii_call, "refused")
    add("ascii_pickle_dump", "pickle", lambda: pickle.dumps(dump(), protocol=0), None)
    # JSON written with a UTF-8 byte-order mark (Windows editors, some exporters)
    add("json_with_bom", "pickle", b"\xef\xbb\xbf" + json.dumps(dump()).encode(), None)
    add("ext_registry", "pickle", b"\x80\x02\x82\x01.", "corrupt pickle")
    add("huge_memo_index", "pickle", b"\x80\x02]r\xff\xff\xff\x7f.", "memory")
    add("memo_get_missing", "pickle", b"\x80\x02h\x07.", "corrupt pickle")
    add("string_length_lie", "pickle", b"\x80\x02X\xff\xff\xff\x7fabc.", "memory")
    add("deep_tuple_dict_key", "pickle", dict_with_key(b"K\x01" + b"\x85" * 1_000_000), "crashed")
    add("laughs_tuple_dict_key", "pickle", dict_with_key(laughs_tuple(60)), "CPU")
    add(
        "deep_nested_lists",
        "pickle",
        b"\x80\x02" + b"]" * 300_000 + b"a" * 299_999 + b".",
        "top level is list",
    )
    add(
        "laughs_in_sizes", "pickle", pickled(with_entry(input_sizes=laughs_list(60))), "input_sizes"
    )
    add(
        "laughs_in_group",
        "pickle",
        pickled(with_entry(process_group=laughs_list(60))),
        "process_group",
    )
    add("laughs_compared", "pickle", pickled(laughs_compared()), "CPU-time budget")
    add("laughs_in_frames", "pickle", pickled(with_entry(frames=laughs_list(60))), None)
    add("laughs_in_unused_key", "pickle", pickled(dump(extra=laughs_list(60))), None)
    add("laughs_as_version", "pickle", pickled(dump(version=laughs_list(60))), "'version' is list")
    add(
        "laughs_in_pg_config",
        "pickle",
        pickled(dump(pg_config={"0": {"name": "0", "desc": "x", "ranks": laughs_list(60)}})),
        None,
    )
    add("object_flood", "bomb", lambda: b"\x80\x02]" + b"]a" * (40 << 20) + b".", "memory")
    add("sparse_6gib_file", "bomb", b"", "max_file_bytes")  # made sparse below
    add("string_300mb_sparse", "bomb", b"", "max_file_bytes")  # made sparse below

    # -- resource bombs ----------------------------------------------------------------------
    add("gzip_bomb", "bomb", gzip_bomb, "gzip inflates")
    add("gzip_truncated", "bomb", gzip.compress(pickled(dump()))[:-20], "gzip")
    add("gzip_trailing_garbage", "bomb", gzip.compress(pickled(dump())) + b"garbage", "gzip")
    add("too_many_entries", "bomb", pickled(dump([nccl_entry(0, 1)] * 30_000)), "max_entries")
    add("huge_sizes_list", "bomb", pickled(with_entry(input_sizes=[[1]] * 10_000)), "max_list_len")
    add(
        "deep_stack_cut",
        "bomb",
        pickled(with_entry(frames=[{"name": "f", "filename": "f.py", "line": 1}] * 5000)),
        None,
    )
    add(
        "megabyte_profiling_name",
        "bomb",
        pickled(with_entry(profiling_name="nccl:" + "x" * (1 << 20))),
        None,
    )
    add("json_deep_nesting", "bomb", b"[" * 200_000 + b"]" * 200_000, "nested too deeply")
    add(
        "json_huge_int",
        "bomb",
        b'{"version": "2.10", "entries": [], "x": ' + b"9" * 100_000 + b"}",
        "invalid JSON",
    )
    add("empty_file", "bomb", b"", "empty file")

    # -- wrong types -------------------------------------------------------------------------
    add(
        "frame_line_not_number",
        "types",
        pickled(with_entry(frames=[{"name": "f", "filename": "f.py", "line": "x"}])),
        None,
    )
    # A stack of the wrong type is dropped (an optional field), whatever the type. Protocol 4
    # writes bytes and sets with opcodes of their own (protocol 2 would need a global).
    frame = {"name": "f", "filename": "f.py", "line": 1}
    odd_stacks: dict[str, Any] = {
        "str": "f at f.py:1",
        "dict": frame,
        "int": 7,
        "frame_name_int": [dict(frame, name=3)],
        "frame_filename_list": [dict(frame, filename=["f.py"])],
        "frame_line_float": [dict(frame, line=1.5)],
    }
    for label, stack in odd_stacks.items():
        add(f"frames_{label}", "types", pickled(with_entry(frames=stack)), None)
        add(f"frames_{label}_json", "types", json.dumps(json_frames(stack)).encode(), None)
    for label, stack in {
        "tuple": (frame,),
        "bytes": b"f at f.py:1",
        "set": {"f", "f.py"},
        "list_of_bytes": [b"f"],
        "list_of_sets": [{"f"}],
        "frame_name_bytes": [dict(frame, name=b"f")],
    }.items():
        add(f"frames_{label}", "types", pickle.dumps(with_entry(frames=stack), protocol=4), None)
    # A version that is not a string skips the file (torch always wrote a string).
    nested: Any = "2.10"
    for _ in range(50):
        nested = [nested]
    for label, version in {"int": 2, "float": 2.1, "list": ["2.10"], "dict": {"v": "2.10"}}.items():
        reason = f"'version' is {type(version).__name__}"
        add(f"version_{label}", "types", pickled(dump(version=version)), reason)
        add(f"version_{label}_json", "types", json.dumps(dump(version=version)).encode(), reason)
    add("version_nested_json", "types", json.dumps(dump(version=nested)).encode(), "'version'")
    add("version_1_4", "types", pickled(dump(version="1.4")), "format version 1.4")
    add("entries_seq_id_only", "types", pickled(seq_id_only()), "'seq_id'")
    # Containers of the wrong type: the file is skipped naming the field, or the value unset.
    add("entries_dict", "types", pickled(dict(dump(), entries={"0": nccl_entry(0, 1)})), "entries")
    add("entries_str_json", "types", json.dumps(dict(dump(), entries="x")).encode(), "entries")
    add("entry_list_json", "types", json.dumps(dict(dump(), entries=[[1]])).encode(), "entry 0")
    add("pg_config_list", "types", pickled(dump(pg_config=[["0", [0, 1]]])), "'pg_config'")
    add("pg_status_str_json", "types", json.dumps(dump(pg_status="x")).encode(), "'pg_status'")
    add(
        "process_group_three_json",
        "types",
        json.dumps(json_dump(process_group=["0", "a", "b"])).encode(),
        "process_group",
    )
    add("pg_config_group_list", "types", pickled(dump(pg_config={"0": [0, 1]})), None)
    add(
        "pg_config_fields_odd",
        "types",
        pickled(dump(pg_config={"0": {"name": ["0"], "desc": 1, "ranks": {"0": 1}}})),
        None,
    )
    add("pg_status_group_list", "types", pickled(dump(pg_status={"0": [3, 3, 3]})), None)
    add("pg_status_tuple_key", "types", pickled(dump(pg_status={("0",): {}})), None)
    add("sizes_nested_too_deep", "types", pickled(with_entry(input_sizes=[[[3]]])), "input_sizes")
    add(
        "sizes_hold_strings",
        "types",
        pickled(with_entry(output_sizes=[["3", "4"]])),
        "output_sizes",
    )
    add(
        "numel_overflows_int64",
        "types",
        pickled(with_entry(input_sizes=[[1 << 40, 1 << 40]], output_sizes=[[1 << 40, 1 << 40]])),
        None,
    )
    add(
        "dimension_overflows_int64",
        "types",
        pickled(with_entry(input_sizes=[[1 << 64]])),
        "input_sizes",
    )
    add("timeout_overflows_int64", "types", pickled(with_entry(timeout_ms=1 << 70)), None)
    add("duration_overflows_float", "types", pickled(with_entry(duration_ms=10**400)), None)
    add(
        "pg_status_overflows_int64",
        "types",
        pickled(dump(pg_status={"0": {"last_enqueued_collective": 1 << 70}})),
        None,
    )
    add(
        "json_infinity_duration",
        "types",
        json.dumps(json_dump(duration_ms=float("inf"))).encode(),
        None,
    )
    add(
        "json_nan_times",
        "types",
        json.dumps(json_dump(time_created_ns=float("nan"))).encode(),
        None,
    )
    add(
        "json_infinity_seq",
        "types",
        json.dumps(json_dump(collective_seq_id=float("inf"))).encode(),
        "collective_seq_id",
    )
    add("process_group_int", "types", pickled(with_entry(process_group=7)), "process_group")
    add(
        "process_group_three",
        "types",
        pickled(with_entry(process_group=("0", "a", "b"))),
        "process_group",
    )
    add("seq_id_str", "types", pickled(with_entry(collective_seq_id="abc")), "collective_seq_id")
    add(
        "seq_id_above_int32",
        "types",
        pickled(with_entry(collective_seq_id=1 << 40)),
        "collective_seq_id",
    )
    add(
        "group_name_not_ascii_digits",
        "types",
        pickled(with_entry(process_group=("²", "odd"))),
        None,
    )
    add(
        "pg_config_ranks_unparseable",
        "types",
        pickled(dump(pg_config={"0": {"name": "0", "desc": "default_pg", "ranks": "[0, 1"}})),
        None,
    )
    add(
        "pg_config_rank_1e9",
        "types",
        pickled(
            dump(pg_config={"0": {"name": "0", "desc": "default_pg", "ranks": "[0, 1000000000]"}})
        ),
        "max_rank",
    )
    add(
        "profiling_name_list",
        "types",
        pickled(with_entry(profiling_name=["nccl:all_reduce"])),
        "profiling_name",
    )
    add("state_none", "types", pickled(with_entry(state=None)), "state")
    add("is_p2p_str", "types", pickled(with_entry(is_p2p="yes")), "is_p2p")
    add("entry_not_dict", "types", pickled(dict(dump(), entries=[1, 2])), "entry 0 is int")
    add(
        "too_many_groups",
        "types",
        pickled(dump(pg_status={str(i): {} for i in range(100_001)})),
        "max_groups",
    )
    add(
        "size_hint_1e12_members",
        "types",
        pickled(
            dump(
                [
                    nccl_entry(
                        i,
                        i + 1,
                        process_group=("7", "default_pg"),
                        profiling_name="nccl:all_gather",
                        input_sizes=[[1]],
                        output_sizes=[[10**12]],
                    )
                    for i in range(3)
                ]
            )
        ),
        None,
    )
    add(
        "p2p_peer_above_int32",
        "types",
        pickled(with_entry(profiling_name="nccl:send 0->99999999999")),
        None,
    )
    add(
        "terminal_escapes_in_strings",
        "types",
        pickled(
            with_entry(
                profiling_name="nccl:\x1b]0;pwned\x07\x1b[2J\r\x9b31m", thread_name="\x1b[31mred"
            )
        ),
        None,
    )

    # give every file case its own rank and file name
    for rank, case in enumerate(out, start=2):
        case.file = f"trace_{rank}"
        case.skipped = dict.fromkeys([case.file], *case.skipped.values()) if case.skipped else {}
        case.analyzed = [rank] if case.analyzed else []
    sparse = {
        "sparse_6gib_file": (b"", 6 << 30),
        "string_300mb_sparse": (b"\x80\x02X\x00\x00\xe0\x12", 300 << 20),
    }
    for case in out:
        if case.name in sparse:
            header, size = sparse[case.name]
            case.build = _sparse(header, size)
    out.extend(fs_cases(len(out) + 2))
    out.extend(cli_cases())
    return out


def json_dump(**fields: Any) -> dict[str, Any]:
    data = with_entry(**fields)
    for entry in data["entries"]:
        entry.pop("frames")
    return data


def seq_id_only() -> dict[str, Any]:
    """A dump whose entries have the `seq_id` of formats before 2.0, though it says 2.10."""
    data = dump()
    for entry in data["entries"]:
        entry["seq_id"] = entry.pop("collective_seq_id")
    return data


def json_frames(frames: Any) -> dict[str, Any]:
    """A JSON dump whose second entry has a `frames` key (torch's JSON dumps have none)."""
    data = json_dump()
    data["entries"][1]["frames"] = frames
    return data


def _sparse(header: bytes, size: int) -> Build:
    def build(folder: Path, file: str) -> None:
        with open(folder / file, "wb") as f:
            f.write(header)
            f.truncate(size)

    return build


def fs_cases(first_rank: int) -> list[Case]:
    """File-system oddities named like dumps, and odd names."""
    out: list[Case] = []
    garbage = b"not a dump\x00\n"  # binary: text would be read as a log

    def named(label: str, file: str, build: Build, reason: str | None) -> None:
        rank = first_rank + len(out)
        case = Case(f"fs_{label}", "fs", build, file=file.format(rank=rank))
        if reason is not None:
            case.skipped = {case.file: reason}
        out.append(case)

    def blob(data: bytes) -> Build:
        def build(folder: Path, file: str) -> None:
            write(folder / file, data)

        return build

    named("fifo", "trace_{rank}", _fifo, "a FIFO")
    named("socket", "trace_{rank}", _socket, "a socket")
    named("symlink_dev_zero", "trace_{rank}", _symlink("/dev/zero"), "symbolic link")
    named("symlink_to_dump", "trace_{rank}", _symlink("trace_0"), "symbolic link")
    named("dangling_symlink", "trace_{rank}", _symlink("/nonexistent/x"), "symbolic link")
    named("directory_in_host_folder", "trace_{rank}", _subdir, "a directory")
    named("non_utf8_name", "trace_\udcff\udcfe_{rank}", blob(garbage), "neither a pickle")
    named(
        "newline_in_name",
        "trace_\nfrtrace: error: forged {rank}",
        blob(garbage),
        "neither a pickle",
    )
    named("escape_in_name", "trace_\x1b]0;pwned\x07_{rank}", blob(garbage), "neither a pickle")
    named("rank_2_pow_31", "trace_2147483648", blob(pickled(dump())), "max_rank")
    named("fullwidth_digit_not_a_rank", "trace_１２", blob(pickled(dump())), None)
    # text without a log's structure, named like a dump: a broken dump of that rank
    named("plain_text", "trace_{rank}", blob(b"not a dump at all\nno\n"), "neither a pickle")
    named("text_then_binary", "trace_{rank}", blob(b"hello\n\x00\x01\x02"), "neither a pickle")
    return out


def cli_cases() -> list[Case]:
    """Misused options: usage errors (status 2), never internal errors or tracebacks."""

    def nothing(folder: Path, file: str) -> None:
        return None

    def usage(name: str, args: tuple[str, ...], stderr: str) -> Case:
        return Case(name, "cli", nothing, args=args, status=2, stderr=stderr, batch=False)

    out = [
        usage("reversed_rank_range", ("--selected-ranks", "5-1"), "reversed range"),
        usage("rank_range_1e12", ("--selected-ranks", "0-1000000000000"), "above the largest rank"),
        usage("rank_not_a_number", ("--selected-ranks", "abc"), "not a rank"),
        usage("rank_fullwidth_digit", ("--selected-ranks", "３"), "not a rank"),
        usage("jobs_zero", ("--jobs", "0"), "--jobs"),
        usage("mismatch_cap_negative", ("--mismatch-cap", "-1"), "--mismatch-cap"),
        usage("format_unknown", ("--format", "xml"), "--format"),
    ]

    out.append(
        Case(
            "output_overwrites_dump",
            "cli",
            nothing,
            args=("-o", "{dir}/trace_0"),
            status=2,
            stderr="input dump",
            batch=False,
            check=lambda folder, _r: _unchanged(folder / "trace_0"),
        )
    )
    out.append(
        Case(
            "output_is_a_folder",
            "cli",
            nothing,
            args=("-o", "{dir}"),
            status=2,
            stderr="directory",
            batch=False,
        )
    )

    def link_to_dump(folder: Path, file: str) -> None:
        os.symlink(folder / "trace_1", folder.parent / "report-link.json")

    out.append(
        Case(
            "output_link_to_dump",
            "cli",
            link_to_dump,
            args=("-o", "{dir}/../report-link.json"),
            status=2,
            stderr="input dump",
            batch=False,
            check=lambda folder, _r: _unchanged(folder / "trace_1"),
        )
    )
    return out


def _unchanged(path: Path) -> None:
    assert pickle.loads(path.read_bytes())["version"] == "2.10", f"{path} was overwritten"


def verify(selected: list[Case], result: Result, folder: Path, report_path: Path) -> None:
    """What every hostile case must give: no traceback, one escaped line per skipped file,
    the good ranks analyzed, nothing executed, no raw control characters on the terminal."""
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    assert not RAW_CONTROLS.search(result.stdout), "raw control characters on stdout"
    assert not RAW_CONTROLS.search(result.stderr), "raw control characters on stderr"
    assert not any(line.startswith("frtrace: error: forged") for line in result.stderr.split("\n"))
    assert not (folder.parent / MARKER_NAME).exists(), "a pickle ran code"
    expected_status = {c.status for c in selected}
    if expected_status == {0}:
        # File cases: analysis ran on what was usable: 0 or 1, or 4 where a skipped file
        # leaves the job not seen whole (healthy cannot be told).
        assert result.status in (0, 1, 4), result.stderr[-2000:]
    else:
        assert result.status in expected_status, result.stderr[-2000:]
    for case in selected:
        assert case.stderr in result.stderr, (case.name, result.stderr[-2000:])
        if case.check is not None:
            case.check(folder, result)
    if result.status not in (0, 1, 4):
        return
    report = json.loads(report_path.read_text())
    reasons = {Path(s["file"]).name: s["reason"] for s in report["inputs"]["skipped"]}
    lines = result.stderr.split("\n")
    for case in selected:
        for file, reason in case.skipped.items():
            assert file in reasons, (case.name, file, sorted(reasons))
            assert reason in reasons[file], (case.name, reasons[file])
            assert "\n" not in reasons[file]
            said = f"/{safe(file)}: {safe(reasons[file])}"
            assert any(line.startswith("skipped ") and line.endswith(said) for line in lines), (
                case.name,
                said,
            )
    expected_ranks = sorted({0, 1, *(r for c in selected for r in c.analyzed)})
    assert report["inputs"]["ranks"] == expected_ranks
    assert len(result.stderr.split("\n")) < 20 + 3 * len(selected)


def build_folder(folder: Path, selected: list[Case]) -> None:
    """The good dumps plus every selected case's bad input."""
    good_dumps(folder)
    for case in selected:
        case.build(folder, case.file)


def case_args(case: Case, folder: Path, report: Path) -> list[str]:
    """Text report on stdout (checked for raw control characters), JSON report in `report`."""
    extra = [a.replace("{dir}", str(folder)) for a in case.args]
    if "-o" not in extra:
        extra += ["-o", str(report)]
    return [str(folder), "--prefix", "trace_", *extra]
