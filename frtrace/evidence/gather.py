"""The joining step: tie every record of the logs and stacks to a global rank, a host and a pid.

The readers give each record its speaker as the line states it; here speakers become ranks:
1. Nodes. An srun task, a torchrun role that ends at a separator (`--role $(hostname):`,
   `Speaker.node_role`), a per-node file, a py-spy file, a dump's name or folder each stand
   for a node; they are one node when one line carries two of them (a task's lines with a
   role) or when they name the same host
   (torchelastic's summary `host :`, slurm's `srun: error: <node>: task <t>:`, the job's own
   `host=` lines, NCCL's `host:pid:tid`, the file or folder name). A short role (`--role 17:`)
   is the one host whose digits it is, when exactly one is.
2. Local ranks. torchrun's header numbers are local ranks, unless a prefix template made them
   global ranks (decided for the whole job: a line whose number and rank tag differ, or two
   nodes showing the same number, says local). (node, local rank) -> global rank comes from
   the rank tag on the same line, torchelastic's summary, its agent's roster, the job's own
   lines, py-spy's `--locals` and frtrace collect's labels.
3. Pids. (node, pid) -> rank from the summary, the agent's `failed ... (pid: P)` lines, the
   job's lines and torch's Python logging (which states the writer's pid beside its rank tag).
4. Stacks. A py-spy process is a rank's by its label, its (node, pid), its `--locals`; on a
   node whose worker processes and ranks are as many, the last unmatched pair is the same; the
   one process outside collectives on a node where one rank is not waiting is that rank (a
   note says so), also for faulthandler dumps filed by host alone. What nothing ties stays a
   process on a host, never a guessed rank.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path

from frtrace.dumps.discover import strip_suffixes
from frtrace.evidence.logs import (
    LAST_LINES,
    ParsedLog,
    collecting_folder,
    collective_of,
    same_folder,
    short_host,
)
from frtrace.evidence.pyspy import ParsedStacks
from frtrace.evidence.records import (
    AgentEvent,
    Communicator,
    Ending,
    Evidence,
    Exited,
    InputFile,
    ProcessStack,
    PyFrame,
    RankEvidence,
    SlurmEvent,
    Speaker,
    Where,
    every_rank,
)

# How much a source's word on a node's name counts: the agent's summary and slurm name the
# machine; the job's own lines and NCCL too; a file's or folder's name is what the user chose
# when collecting; a torchrun role is whatever the user passed.
_STRONG, _MEDIUM, _WEAK = 3, 2, 1
# C++ frames of a collective's wait, as `py-spy dump --native` names them
_COLLECTIVE_NATIVE = re.compile(r"\bc10d::|\bgloo::|\bnccl|ProcessGroup(?:NCCL|Gloo)")
_USELESS_HOSTS = re.compile(r"^(?:localhost(?:\.localdomain)?|127(?:\.\d{1,3}){3}|::1|0\.0\.0\.0)$")


@dataclass(frozen=True)
class DumpHost:
    """A dump file, its rank, the host its name or folder gives ('' if none), and the Python
    stack of its last entry (its `frames`, innermost first: `FlightRecorder<EventType>::record`
    in torch's FlightRecorderDetail.hpp gathers the CapturedTraceback as the call is made)."""

    rank: int
    path: str
    host: str
    last_call: tuple[PyFrame, ...] = ()


# Words of dump file names (torch's `nccl_trace_rank_`, `comm_lib_trace_rank_`, users' `fr_`):
# an inferred prefix that goes past the last of them has eaten into the host's name.
_DUMP_WORDS = frozenset(
    ["nccl", "comm", "lib", "trace", "rank", "fr", "flight", "recorder", "dump", "torch"]
)


def dump_host(
    path: Path, prefix: str, root: Path | None, shared: frozenset[str] = frozenset()
) -> str:
    """The host in a dump's name (`nccl_trace_rank_node03-host_27` -> node03-host), else its
    folder (one folder per node, unless it collects: `collecting_folder`), else ''. The
    prefix inferred from a family
    of names stops where their hosts first differ (`nccl_trace_rank_train-a3-`): only its
    part up to its last dump word is taken off."""
    stem = strip_suffixes(path.name)
    pieces = re.split(r"([_\-.])", prefix)
    words = [i for i in range(0, len(pieces), 2) if pieces[i].lower() in _DUMP_WORDS]
    if words and words[-1] + 2 < len(pieces):  # up to the separator after the last dump word
        prefix = "".join(pieces[: words[-1] + 2])
    middle = stem[len(prefix) :] if prefix and stem.startswith(prefix) else ""
    middle = middle.rstrip("0123456789").rstrip("_-.")
    if middle:
        return middle
    parent = path.parent
    if root is None or same_folder(parent, root) or not parent.name:
        return ""
    return "" if collecting_folder(parent, root, shared) else parent.name


def in_collective(stack: ProcessStack) -> str | None:
    """The collective the process's main thread is in ('' when in torch.distributed but the
    op is not told), None when it is outside collectives or nothing is known."""
    main = stack.main
    if main is None or not main.frames:
        return None
    op, _site = collective_of(main.frames)
    if op:
        return op
    for frame in main.frames:
        path = frame.file.replace("\\", "/")
        if path.endswith(".py"):
            return "" if "torch/distributed/" in path else None
        if frame.native and _COLLECTIVE_NATIVE.search(frame.function):
            return ""  # waiting inside c10d (`--native`), its Python frames cut off
    return None


# --- nodes ---------------------------------------------------------------------------------

Key = tuple[str, str]  # ("task", "3"), ("role", "nodeB"), ("file", path), ("host", name)


class _Nodes:
    """Union-find over what stands for a node, with the names each is given."""

    def __init__(self, one_node: Iterable[str] = ()) -> None:
        self.parent: dict[Key, Key] = {}
        self.names: dict[Key, Counter[str]] = defaultdict(Counter)
        self.strongest: dict[str, int] = defaultdict(int)  # short name -> its best source
        self.display: dict[str, Counter[str]] = defaultdict(Counter)  # short -> spellings
        # root -> the names of every key under it, kept up to date by union and name so that
        # a node's name is one lookup, not a pass over every key (host() is asked per record)
        self.totals: dict[Key, Counter[str]] = {}
        self.hosts: dict[Key, str] = {}  # root -> host(), until the next union or name
        self.one_node = frozenset(one_node)  # paths of the files that hold one node's output

    def find(self, key: Key) -> Key:
        self.parent.setdefault(key, key)
        while self.parent[key] != key:
            self.parent[key] = self.parent[self.parent[key]]
            key = self.parent[key]
        return key

    def union(self, a: Key, b: Key) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[rb] = ra
            if rb in self.totals:
                self.totals.setdefault(ra, Counter()).update(self.totals.pop(rb))
            self.hosts.clear()

    def name(self, key: Key, host: str, weight: int) -> None:
        host = host.strip()
        if not host or _USELESS_HOSTS.match(host.lower()):
            return
        short = short_host(host)
        self.names[key][short] += weight
        self.totals.setdefault(self.find(key), Counter())[short] += weight
        self.strongest[short] = max(self.strongest[short], weight)
        self.display[short][host] += weight
        self.hosts.clear()

    def settle(self) -> None:
        """Join the keys that name the same host (medium or strong words), and a short role
        (`--role 17:`) to the one host whose digits it is."""
        by_name: dict[str, Key] = {}
        for key, names in list(self.names.items()):
            for short, weight in names.items():
                if weight < _MEDIUM and key[0] != "role":
                    continue
                if short in by_name:
                    self.union(by_name[short], key)
                else:
                    by_name[short] = key
        hosts = [n for n in by_name if not n.isdigit()]
        for key in list(self.parent):
            if key[0] != "role" or not key[1].isdigit():
                continue
            if any(not n.isdigit() for n in self.totals.get(self.find(key), ())):
                continue
            # a host without digits is no role's (role `0:` is not `nodeB`'s)
            digits = [
                h
                for h in hosts
                if (d := re.sub(r"\D", "", h)) and d.lstrip("0") == key[1].lstrip("0")
            ]
            if len(digits) == 1:
                self.union(by_name[digits[0]], key)

    def host(self, key: Key | None) -> str:
        """The node's name: the most qualified, then best-attested, spelling of its
        best-attested name ('' for an unknown node)."""
        if key is None:
            return ""
        root = self.find(key)
        if root not in self.hosts:
            self.hosts[root] = self._best(self.totals.get(root, Counter()))
        return self.hosts[root]

    def _best(self, total: Counter[str]) -> str:
        if not total:
            return ""
        best = max(total, key=lambda n: (not n.isdigit(), self.strongest[n], total[n], -len(n)))
        if best.isdigit():  # a bare number (`--role $SLURM_NODEID:`) names no host to ssh to
            return ""
        # the most qualified spelling: torchelastic's summary gives socket.getfqdn()
        # (torch/distributed/elastic/multiprocessing/errors/__init__.py, ChildFailedError's
        # _format_failure), NCCL and the launchers the short hostname; the domain only adds
        spellings = self.display[best]
        return max(spellings, key=lambda s: (s.count("."), spellings[s], -len(s)))


def useful_host(name: str) -> bool:
    """A host name that names a machine (not `localhost`, not a loopback address)."""
    return bool(name.strip()) and not _USELESS_HOSTS.match(name.strip().lower())


def per_node(log: ParsedLog) -> bool:
    """Whether a file holds one node's output, so that its place (folder, name) names that
    node and its unlabelled lines are that node's: srun labels of one task at most (srun's
    `--output=trace-%N.out` writes one file per node, the `%N` filename pattern of srun's
    man page, and torchrun runs as one task per node), at most one torchrun `--role
    <host>:`, one agent, one host in torchelastic's summary. A job-wide file (every node's
    output interleaved without labels) names no node by itself."""
    if log.labelled and len(_tasks(log)) != 1:
        return False
    roles = {s.node_role for s in log.speakers if s.node_role}
    hosts = {short_host(e.host) for _s, e in log.exits if useful_host(e.host)}
    return len(roles) <= 1 and len(hosts) <= 1 and len(log.agent_pids) <= 1


def _tasks(log: ParsedLog) -> set[int]:
    """The srun tasks a labelled file's lines carry."""
    speakers = [*log.speakers, *(s for s, _r in log.rosters), *(s for s, _e in log.exits)]
    speakers += [s for s, _a in log.agent]
    return {s.task for s in speakers if s.task is not None}


def _speaker_keys(nodes: _Nodes, log: ParsedLog, speaker: Speaker) -> list[Key]:
    """What in a line stands for its node: its srun task, its `--role <host>:`, its file (a
    one-node file); none in a job-wide file without labels or roles."""
    keys: list[Key] = []
    if speaker.task is not None:
        keys.append(("task", str(speaker.task)))
    if speaker.node_role:
        keys.append(("role", speaker.node_role))
    if speaker.task is None and log.input.path in nodes.one_node:
        keys.append(("file", log.input.path))
    return keys


def _node_of(nodes: _Nodes, log: ParsedLog, speaker: Speaker) -> Key | None:
    keys = _speaker_keys(nodes, log, speaker)
    return nodes.find(keys[0]) if keys else None


def _exit_keys(nodes: _Nodes, log: ParsedLog, speaker: Speaker, exited: Exited) -> list[Key]:
    """A torchelastic summary entry's node: where its agent wrote it, and the host it names."""
    keys = _speaker_keys(nodes, log, speaker)
    if useful_host(exited.host):
        keys.append(("host", short_host(exited.host)))
    return keys


def _exit_node(nodes: _Nodes, log: ParsedLog, speaker: Speaker, exited: Exited) -> Key | None:
    keys = _exit_keys(nodes, log, speaker, exited)
    return nodes.find(keys[0]) if keys else None


def _agent_keys(nodes: _Nodes, log: ParsedLog, speaker: Speaker, event: AgentEvent) -> list[Key]:
    keys = _speaker_keys(nodes, log, speaker)
    if event.agent_pid is not None:
        keys.append(("agent", f"{log.input.path}:{event.agent_pid}"))
    return keys


def _agent_node(nodes: _Nodes, log: ParsedLog, speaker: Speaker, event: AgentEvent) -> Key | None:
    keys = _agent_keys(nodes, log, speaker, event)
    return nodes.find(keys[0]) if keys else None


# A collective call: its op and the job's frame that made it (function, file name, line).
Call = tuple[str, str, str, int]


def call_of(frames: tuple[PyFrame, ...]) -> Call | None:
    """The collective call a stack is in (innermost first), None outside one or where the
    job's frame that made it is not shown. Files compare by name: py-spy shortens paths, a
    dump's frames keep them whole."""
    op, site = collective_of(frames)
    if not op or site is None:
        return None
    return (op, site.function, site.file.replace("\\", "/").rsplit("/", 1)[-1], site.line)


def _live_call(proc: ProcessStack) -> Call | None:
    return call_of(proc.main.frames) if proc.main is not None else None


@dataclass
class _Join:
    """The job's identities, as the joining step builds them."""

    nodes: _Nodes = field(default_factory=_Nodes)
    headers_global: bool = False
    slots: dict[tuple[Key, int], int] = field(default_factory=dict)  # (node, local) -> rank
    pids: dict[tuple[Key, int], int] = field(default_factory=dict)  # (node, pid) -> rank
    rank_node: dict[int, Key] = field(default_factory=dict)
    calls: dict[int, Call] = field(default_factory=dict)  # rank -> its dump's last call


def _build_nodes(
    logs: list[ParsedLog], stacks: list[ParsedStacks], dumps: list[DumpHost]
) -> _Nodes:
    nodes = _Nodes(log.input.path for log in logs if per_node(log))
    for log in logs:
        speakers = dict.fromkeys([*log.speakers, *(s for s, _r in log.rosters)])
        roles = set()
        for speaker in speakers:
            keys = _speaker_keys(nodes, log, speaker)
            for key in keys[1:]:
                nodes.union(keys[0], key)
            if speaker.node_role:
                roles.add(speaker.node_role)
                nodes.name(("role", speaker.node_role), speaker.node_role, _WEAK)
        file_key: Key = ("file", log.input.path)
        if log.input.path in nodes.one_node:
            nodes.find(file_key)
            if len(roles) == 1:
                nodes.union(file_key, ("role", roles.pop()))
            if log.labelled:  # one task's file (`per_node`): the task is the file's node
                nodes.union(file_key, ("task", str(_tasks(log).pop())))
            if log.host and log.file_rank is None:
                nodes.name(file_key, log.host, _MEDIUM)
        by_pid: dict[int, Key] = {}
        for speaker, exited in log.exits:
            keys = _exit_keys(nodes, log, speaker, exited)
            for key in keys[1:]:
                nodes.union(keys[0], key)
            if keys:
                nodes.name(keys[0], exited.host, _STRONG)
                if exited.pid is not None:
                    by_pid[exited.pid] = keys[0]
        for speaker, event in log.agent:
            keys = _agent_keys(nodes, log, speaker, event)
            for key in keys[1:]:
                nodes.union(keys[0], key)
            if keys and event.pid is not None and event.pid in by_pid:  # the agent's worker
                nodes.union(by_pid[event.pid], keys[0])
        for speaker, claim in log.claims:
            node = _node_of(nodes, log, speaker)
            if claim.host and node is not None and claim.source != "job-on":
                weight = _STRONG if claim.source == "nccl" else _MEDIUM
                nodes.name(node, claim.host, weight)
        for slurm in log.slurm:
            for task in slurm.tasks:
                nodes.name(("task", str(task)), slurm.node, _STRONG)
        for _speaker, warned in log.warnings:  # NCCL names its host: filed under it below
            nodes.name(("host", short_host(warned.host)), warned.host, _STRONG)
        for address in log.addresses:
            nodes.name(("host", short_host(address.host)), address.host, _STRONG)
        for _n, comm, _id in log.comms:
            nodes.name(("host", short_host(comm.host)), comm.host, _STRONG)
    for file in stacks:
        nodes.name(("file", file.input.path), file.host, _MEDIUM)
        for proc in file.processes:
            if proc.label is not None and proc.label.host:
                nodes.name(("host", short_host(proc.label.host)), proc.label.host, _STRONG)
    for d in dumps:
        if d.host:
            nodes.name(("host", short_host(d.host)), d.host, _MEDIUM)
    nodes.settle()
    return nodes


def _headers_global(logs: list[ParsedLog], nodes: _Nodes) -> bool:
    """Whether torchrun's header numbers are global ranks (a prefix template) rather than
    local ranks (torchrun's default), for the whole job."""
    numbers: dict[Key, set[int]] = defaultdict(set)
    agree = differ = False
    for log in logs:
        for s in log.speakers:
            node = _node_of(nodes, log, s)
            if s.number is None or node is None:
                continue
            numbers[node].add(s.number)
            if s.rank is not None:
                differ |= s.rank != s.number
                agree |= s.rank == s.number and s.number > 0
    if differ:
        return False
    sets = list(numbers.values())
    shared = any(a & b for i, a in enumerate(sets) for b in sets[i + 1 :])
    if shared:
        return False
    if agree and any(0 not in s for s in sets):
        return True
    return len(sets) > 1


def _build_slots(logs: list[ParsedLog], stacks: list[ParsedStacks], join: _Join) -> None:
    """(node, local rank) -> global rank, and (node, pid) -> global rank, from every source
    that states both (where the node is known)."""
    nodes = join.nodes
    slots, pids = join.slots, join.pids
    for log in logs:
        for s in log.speakers:
            node = _node_of(nodes, log, s)
            if s.number is not None and s.rank is not None and not join.headers_global and node:
                slots[(node, s.number)] = s.rank
        for speaker, exited in log.exits:
            node = _exit_node(nodes, log, speaker, exited)
            if node is None or exited.rank is None:
                continue
            if exited.local_rank is not None:
                slots[(node, exited.local_rank)] = exited.rank
            if exited.pid is not None:
                pids[(node, exited.pid)] = exited.rank
        for speaker, roster in log.rosters:
            node = _node_of(nodes, log, speaker)
            for local, rank in zip(roster.local_ranks, roster.global_ranks, strict=False):
                if node is not None:
                    slots[(node, local)] = rank
        for speaker, claim in log.claims:
            node = _node_of(nodes, log, speaker)
            if node is None or claim.rank is None or not claim.source.startswith("job"):
                continue
            said_local = claim.local_rank
            if said_local is None and not join.headers_global and speaker.number is not None:
                # `rank 3 on node17` written by node17's local rank 1: that local rank
                named = claim.host and short_host(claim.host) == short_host(nodes.host(node))
                said_local = speaker.number if named else None
            if said_local is None and claim.source == "job" and speaker.anonymous:
                # torchrun --redirects: the file is one local rank's own stream, so the rank
                # (with its pid or host) it states is that local rank's
                said_local = log.file_local
            if said_local is not None and (claim.source == "job" or said_local == speaker.number):
                slots[(node, said_local)] = claim.rank
    for file in stacks:
        for proc in file.processes:
            where = _stack_node(nodes, file.input.path, proc)
            label = proc.label
            if label is not None and label.rank is not None and label.local_rank is not None:
                slots[(where, label.local_rank)] = label.rank
            said, said_local = stated_ranks(proc)
            if said is not None and said_local is not None:
                slots[(where, said_local)] = said
    _nccl_hosts_of_pids(logs, join)
    # NCCL's communicator of the most ranks is the world's (the default group's): a rank in
    # it is the process's global rank (nccl src/init.cc logs each communicator it joins)
    world = max((n for log in logs for n, _c, _i in log.comms), default=0)
    for log in logs:
        for n, comm, _id in log.comms:
            if n == world and comm.pid is not None and comm.rank is not None:
                pids[(nodes.find(("host", short_host(comm.host))), comm.pid)] = comm.rank
    # pids stated beside a rank (or a local rank) once the slots are known
    for log in logs:
        for speaker, claim in log.claims:
            node = _node_of(nodes, log, speaker)
            if claim.pid is None or node is None:
                continue
            owner = claim.rank if claim.rank is not None else _resolve(join, log, speaker)
            if owner is None and claim.local_rank is not None:
                owner = slots.get((node, claim.local_rank))
            if owner is not None:
                pids[(node, claim.pid)] = owner
        for speaker, event in log.agent:
            node = _agent_node(nodes, log, speaker, event)
            if event.event != "failed" or event.pid is None or event.local_rank is None:
                continue
            failed = slots.get((node, event.local_rank)) if node is not None else None
            if node is not None and failed is not None:
                pids[(node, event.pid)] = failed


def _nccl_hosts_of_pids(logs: list[ParsedLog], join: _Join) -> None:
    """A summary entry whose host is no use (`localhost`), on a node no other line names,
    gives its rank a pid; NCCL's own lines name the host each pid runs on (`host:pid:tid`,
    nccl src/debug.cc, ncclDebugLogV). Where exactly one summary entry has that pid and NCCL
    names exactly one host for it, the rank runs there. pids repeat across hosts: two entries
    with one pid, or one pid on two hosts, tie nothing."""
    nodes = join.nodes
    ranks_of: dict[int, set[int]] = defaultdict(set)
    untied: dict[int, int] = {}  # pid -> rank, where the entry's node is unknown
    for log in logs:
        for speaker, exited in log.exits:
            if exited.pid is None or exited.rank is None:
                continue
            ranks_of[exited.pid].add(exited.rank)
            node = _exit_node(nodes, log, speaker, exited)
            if node is None or not nodes.host(node):
                untied[exited.pid] = exited.rank
    if not untied:
        return
    hosts_of: dict[int, set[str]] = defaultdict(set)
    for log in logs:
        for _speaker, warned in log.warnings:
            hosts_of[warned.pid].add(short_host(warned.host))
        for address in log.addresses:
            hosts_of[address.pid].add(short_host(address.host))
        for _n, comm, _i in log.comms:
            if comm.pid is not None:
                hosts_of[comm.pid].add(short_host(comm.host))
    for pid, rank in untied.items():
        hosts = hosts_of.get(pid, set())
        if len(ranks_of[pid]) == 1 and len(hosts) == 1:
            join.pids.setdefault((nodes.find(("host", hosts.pop())), pid), rank)


def _stack_node(nodes: _Nodes, path: str, proc: ProcessStack) -> Key:
    if proc.label is not None and proc.label.host:
        return nodes.find(("host", short_host(proc.label.host)))
    return nodes.find(("file", path))


def _resolve(join: _Join, log: ParsedLog, speaker: Speaker) -> int | None:
    """The global rank a speaker is, as far as the job's identities tell."""
    if speaker.rank is not None:
        return speaker.rank
    if speaker.number is not None:
        if join.headers_global:
            return speaker.number
        node = _node_of(join.nodes, log, speaker)
        return None if node is None else join.slots.get((node, speaker.number))
    if log.file_rank is not None:
        return log.file_rank
    if log.file_local is not None and speaker.task is None:
        return join.slots.get((join.nodes.find(("file", log.input.path)), log.file_local))
    return None


def gather(
    logs: Iterable[ParsedLog], stacks: Iterable[ParsedStacks], dumps: Iterable[DumpHost] = ()
) -> Evidence:
    """The evidence of every input, by global rank."""
    ev = Evidence()
    logs, stacks, dumps = list(logs), list(stacks), list(dumps)
    join = _Join(nodes=_build_nodes(logs, stacks, dumps))
    join.headers_global = _headers_global(logs, join.nodes)
    _build_slots(logs, stacks, join)
    _infer_last_slot(logs, join, ev, dumps, stacks)
    for d in dumps:
        r = ev.rank(d.rank)
        r.add_file(d.path)
        call = call_of(d.last_call)
        if call is not None:
            join.calls[d.rank] = call
        if d.host:
            r.host = r.host or join.nodes.host(("host", short_host(d.host)))
        ev.dump_files += 1
    ev.files.extend(
        _resolved(join, log.input, log.input.path in join.nodes.one_node) for log in logs
    )
    for log in logs:
        _file_log(ev, join, log)
    for (node, pid), rank in join.pids.items():  # a pid stated beside a rank, on a node
        r = _place(ev, join, rank, node, "")
        r.pid = r.pid or pid
    named = _agent_named(join, logs)  # the nodes are joined: one reading serves both users
    _agent_pids_by_elimination(ev, join, named)
    for log in logs:  # `Sending process P closing signal SIGTERM`: P was alive then
        for speaker, event in log.agent:
            agent = _agent_node(join.nodes, log, speaker, event)
            if event.event != "closing" or agent is None or event.pid is None:
                continue
            closed = join.pids.get((agent, event.pid))
            if closed is not None:
                ev.rank(closed).closed = event.signal
    ev.world_size = _stated_world(logs)
    _communicators(ev, join, logs)
    _match_stacks(ev, join, stacks)
    ev.agent_workers = _unranked_workers(ev, join, named)
    ev.ending = _ending(logs, join)
    ev.job_seen = any(_says_anything(log) for log in logs) or any(s.processes for s in stacks)
    ev.debug_detail = any(log.debug_level == "DETAIL" for log in logs)
    for log in logs:
        for address in log.addresses:
            ev.addresses[address.address] = join.nodes.host(("host", short_host(address.host)))
    return ev


def _agent_pids_by_elimination(ev: Evidence, join: _Join, named: dict[Key, list[int]]) -> None:
    """A node's one worker pid its agent names (`Sending process P closing signal`, `failed
    ... (pid: P)`) that nothing ties, and its one rank with no pid, are the same process,
    where the agents name as many workers as the job has ranks (a worker that ended cleanly
    before is named by none, and then nothing is tied)."""
    if sum(len(p) for p in named.values()) != len(ev.ranks):
        return
    for node, pids in named.items():
        host = short_host(join.nodes.host(node))
        untied = [p for p in pids if (node, p) not in join.pids]
        free = [r for r in ev.ranks.values() if host and short_host(r.host) == host and not r.pid]
        if len(untied) == 1 == len(free):
            join.pids[(node, untied[0])] = free[0].rank
            free[0].pid = untied[0]


def _unranked_workers(
    ev: Evidence, join: _Join, named: dict[Key, list[int]]
) -> list[tuple[str, int]]:
    """The worker processes agents name (`Sending process P closing signal`, `failed ...
    (pid: P)`: torch/distributed/elastic/multiprocessing/api.py) that no input ties to a
    rank, on nodes where no rank is seen (a seen rank there may be that process, and a node
    whose agent restarted its workers names the earlier attempt's too), and none at all
    while a seen rank has neither host nor pid: each is then a rank no input shows."""
    if any(not r.host and r.pid is None for r in ev.ranks.values()):
        return []
    seen_on = {short_host(r.host) for r in ev.ranks.values()}
    return [
        (host, pid)
        for node, pids in named.items()
        if (host := join.nodes.host(node)) and short_host(host) not in seen_on
        for pid in pids
        if (node, pid) not in join.pids
    ]


def _agent_named(join: _Join, logs: list[ParsedLog]) -> dict[Key, list[int]]:
    """The worker pids each node's agent names (`Sending process P closing signal`, `failed
    ... (pid: P)`), in the order first named."""
    named: dict[Key, list[int]] = defaultdict(list)
    for log in logs:
        for speaker, event in log.agent:
            if event.event in ("closing", "failed") and event.pid is not None:
                agent = _agent_node(join.nodes, log, speaker, event)
                if agent is not None and event.pid not in named[agent]:
                    named[agent].append(event.pid)
    return named


def _communicators(ev: Evidence, join: _Join, logs: list[ParsedLog]) -> None:
    """NCCL's communicators by commId, each member by global rank (the rank its host and pid
    are tied to) with its rank in the communicator."""
    for log in logs:
        for n, comm, comm_id in log.comms:
            if not comm_id or comm.pid is None or comm.rank is None:
                continue
            rank = join.pids.get((join.nodes.find(("host", short_host(comm.host))), comm.pid))
            if rank is None:
                continue
            known = ev.communicators.setdefault(comm_id, Communicator(comm_id, n))
            known.members[rank] = comm.rank


def _resolved(join: _Join, read: InputFile, one_node: bool) -> InputFile:
    """A file read, with the name of the node it holds as the joining step resolved it."""
    host = join.nodes.host(("file", read.path)) if one_node else ""
    return replace(read, host=host or read.host) if host != read.host else read


def _says_anything(log: ParsedLog) -> bool:
    """Whether a log holds anything of a distributed job (a rank's line, torchrun's agent,
    slurm, NCCL), not only lines of no one's."""
    return bool(
        log.speakers
        or log.agent_pids
        or log.agent
        or log.rosters
        or log.exits
        or log.slurm
        or log.comms
        or log.addresses
        or log.waits
        or log.warnings
        or log.file_rank is not None
    )


def _place(ev: Evidence, join: _Join, rank: int, node: Key | None, path: str) -> RankEvidence:
    r = ev.rank(rank)
    if path:
        r.add_file(path)
    if node is not None:
        join.rank_node.setdefault(rank, node)
        if not r.host:
            r.host = join.nodes.host(node)
    return r


def _file_log(ev: Evidence, join: _Join, log: ParsedLog) -> None:
    """File one log's records under the ranks their speakers are."""
    path = log.input.path
    nodes = join.nodes

    def owner(speaker: Speaker) -> RankEvidence | None:
        rank = _resolve(join, log, speaker)
        if rank is None:
            return None
        node = None if log.file_rank is not None else _node_of(nodes, log, speaker)
        r = _place(ev, join, rank, node, path)
        local = speaker.number if not join.headers_global else None
        if local is None and log.file_local is not None:
            local = log.file_local
        if r.local_rank is None and local is not None:
            r.local_rank = local
        return r

    if log.file_rank is not None:
        _place(ev, join, log.file_rank, None, path)
    for speaker in log.speakers:
        owner(speaker)
        if speaker.number is not None and not join.headers_global:
            ev.workers.add((nodes.host(_node_of(nodes, log, speaker)) or log.host, speaker.number))
    for speaker, wait in log.waits:
        if (r := owner(speaker)) is not None:
            r.waits.append(wait)
    for speaker, raised in log.raised:
        if (r := owner(speaker)) is not None:
            r.raised.append(raised)
    for speaker, group in log.groups:
        if (r := owner(speaker)) is not None:
            r.groups.append(group)
    for speaker, entered in log.entered.items():
        # a --tee'd line is in the node's log and the rank's own file: one copy, in the
        # order logged (a subgroup's lines interleave with the world's)
        if (r := owner(speaker)) is not None and len(entered) > len(r.entered):
            r.entered = list(entered)
    for speaker, stack in log.stacks:
        if (r := owner(speaker)) is not None:
            if r.stack is None:
                r.stack = stack
        elif stack.pid is None:  # a faulthandler dump from a stream several workers share
            node = _node_of(nodes, log, speaker)
            host = (nodes.host(node) if node is not None else "") or log.host
            ev.unmatched.append(_on(stack, host) if host else stack)
    for speaker, lines in log.last_lines.items():
        if (r := owner(speaker)) is not None:
            r.last_lines = [*r.last_lines, *((Where(path, n), t) for n, t in lines)]
            r.last_lines = r.last_lines[-LAST_LINES:]
    for speaker, exited in log.exits:
        if exited.rank is None:
            continue
        node = _exit_node(nodes, log, speaker, exited)
        r = _place(ev, join, exited.rank, node, path)
        r.exits.append(exited)
        r.pid = r.pid or exited.pid
        if r.local_rank is None:
            r.local_rank = exited.local_rank
        if exited.local_rank is not None:
            ev.workers.add((nodes.host(node), exited.local_rank))
    for speaker, warned in log.warnings:
        node = nodes.find(("host", short_host(warned.host)))
        mapped = join.pids.get((node, warned.pid))
        r = _place(ev, join, mapped, node, path) if mapped is not None else owner(speaker)
        if r is not None:
            r.warnings.append(warned)
    for speaker, report in log.reports:
        writer = owner(speaker)
        ev.reports.append(replace(report, by=writer.rank) if writer is not None else report)
    for speaker, claim in log.claims:  # `rank 3 on node17` in node17's file: it runs there
        if claim.rank is None or not claim.host or not claim.source.startswith("job"):
            continue
        node = _node_of(nodes, log, speaker)
        if node is not None and short_host(nodes.host(node)) == short_host(claim.host):
            _place(ev, join, claim.rank, node, path)
    for speaker, roster in log.rosters:  # every rank its node runs, even one that said nothing
        node = _node_of(nodes, log, speaker)
        for local, rank in zip(roster.local_ranks, roster.global_ranks, strict=False):
            placed = _place(ev, join, rank, node, path)
            placed.local_rank = placed.local_rank if placed.local_rank is not None else local


def _stated_world(logs: list[ParsedLog]) -> int | None:
    """The world's size as a line states it: the agents' roster (`global_world_sizes`) or
    NCCL's communicator of the most ranks; None where none does."""
    worlds = [r.world_size for log in logs for _s, r in log.rosters if r.world_size]
    worlds += [n for log in logs for n, _c, _i in log.comms]
    return max(worlds) if worlds else None


def _infer_last_slot(
    logs: list[ParsedLog],
    join: _Join,
    ev: Evidence,
    dumps: list[DumpHost],
    stacks: list[ParsedStacks],
) -> None:
    """One (node, local rank) never matched and one rank never named (ranks run from 0 to at
    least the number of workers the logs show, and the number of worker processes the
    py-spy files show, not counting agents and helpers such as DataLoader workers: a node
    whose log was lost still has its stacks): the same process (a rank that printed nothing
    with its rank on it, often the stuck one)."""
    if join.headers_global:
        return
    nodes = join.nodes
    seen = {
        (node, s.number)
        for log in logs
        for s in log.speakers
        if s.number is not None and (node := _node_of(nodes, log, s)) is not None
    }
    unmatched = sorted(
        (n, local) for n, local in seen if local is not None and (n, local) not in join.slots
    )
    named = set(join.slots.values()) | {
        s.rank for log in logs for s in log.speakers if s.rank is not None
    }
    named |= {d.rank for d in dumps}
    named |= {log.file_rank for log in logs if log.file_rank is not None}
    if not named:
        return
    # torchrun gives each node's workers contiguous global ranks, its base plus the local
    # rank (torch/distributed/elastic/agent/server/api.py, SimpleElasticAgent.
    # _assign_worker_ranks): one pair a node's lines tie gives the rest of its local ranks
    bases: dict[Key, set[int]] = defaultdict(set)
    for (n, local), rank in join.slots.items():
        bases[n].add(rank - local)
    for n, local in unmatched:
        base = bases.get(n, set())
        if len(base) == 1 and (rank := next(iter(base)) + local) not in named and rank >= 0:
            join.slots[(n, local)] = rank
            named.add(rank)
            ev.notes.append(
                f"rank {rank} is taken to be {nodes.host(n) or 'a node'}'s local rank {local}: "
                "torchrun numbers a node's workers from its first rank on"
            )
    unmatched = [(n, local) for n, local in unmatched if (n, local) not in join.slots]
    workers = {
        (_stack_node(nodes, file.input.path, proc), proc.pid)
        for file in stacks
        for proc in file.processes
        if is_worker(proc) and proc.pid is not None
    }
    world = max(max(named) + 1, len(seen | set(join.slots)), len(workers))
    # only a world some line states is whole: otherwise a node whose log and stacks were
    # both lost holds ranks above the highest seen as well, and the unnamed process may be
    # any of them (never guess a rank: its host and pid name it)
    if _stated_world(logs) != world:
        return
    # ranks run from 0: the one rank below `world` never named, found without listing the
    # world (its size comes from untrusted lines)
    if len(unmatched) == 1 and len(named) == world - 1 and min(named) >= 0:
        missing = world * (world - 1) // 2 - sum(named)
        node, local = unmatched[0]
        join.slots[(node, local)] = missing
        ev.notes.append(
            f"rank {missing} is taken to be {nodes.host(node) or 'a node'}'s local rank "
            f"{local}: the one process the logs never name with its rank"
        )


def _match_stacks(ev: Evidence, join: _Join, stacks: list[ParsedStacks]) -> None:
    nodes = join.nodes
    left: dict[Key, list[ProcessStack]] = defaultdict(list)
    for file in stacks:
        ev.files.append(_resolved(join, file.input, True))
        for proc in file.processes:
            if proc.is_agent:
                continue
            node = _stack_node(nodes, file.input.path, proc)
            rank = _stack_rank(join, node, proc)
            if rank is None:
                left[node].append(proc)
                continue
            _take_stack(ev, join, rank, node, proc, file.input.path)
    residents = _Residents.of(ev, join)
    for node, procs in left.items():
        host = nodes.host(node)
        procs = _eliminate(ev, join, residents, node, procs)
        for proc in procs:
            ev.unmatched.append(proc if proc.host == host or not host else _on(proc, host))
    _lone_idle_on_hosts(ev)
    _eliminate_job(ev, join)


def _lone_idle_on_hosts(ev: Evidence) -> None:
    """The stacks no node's elimination saw (faulthandler dumps in a stream several workers
    share, filed by host alone): on each host, the one untied process outside collectives
    and the one rank without a stack its logs show waiting in none (`_lone_idle`)."""
    procs_on, free_on = untied_on_hosts(ev)
    for host, procs in procs_on.items():
        if any(p.pid is not None for p in procs):  # py-spy's: its node's elimination ran
            continue
        pair = _lone_idle(procs, free_on.get(host, []), lambda r: bool(r.waits))
        if pair is not None:
            _adopt(ev, *pair, LONE_IDLE)


def _eliminate_job(ev: Evidence, join: _Join) -> None:
    """The job's last untied worker process and its last rank without a stack are the same
    process, where the world is known whole (its size stated, every rank seen) and the rank's
    host, if known, is the process's."""
    workers = [p for p in ev.unmatched if not is_auxiliary(p)]
    free = [r for r in ev.ranks.values() if r.stack is None]
    whole = ev.world_size is not None and every_rank(ev.ranks, ev.world_size)
    if not whole or len(workers) != 1 or len(free) != 1:
        return
    proc, r = workers[0], free[0]
    if r.host and proc.host and short_host(r.host) != short_host(proc.host):
        return
    _adopt(ev, proc, r, "the one worker process and the one rank of the job left untied")


def _adopt(ev: Evidence, proc: ProcessStack, r: RankEvidence, why: str) -> None:
    """An untied process is rank `r`, for the reason `why` (said in the report's notes)."""
    ev.unmatched.remove(proc)
    r.stack, r.pid, r.host = proc, r.pid or proc.pid, r.host or proc.host
    r.add_file(proc.where.file)
    _note_tie(ev, proc, proc.host, r.rank, why)


def _note_tie(ev: Evidence, proc: ProcessStack, host: str, rank: int, why: str) -> None:
    """The report's note that a py-spy process was taken to be a rank, and why."""
    what = (
        f"py-spy process {proc.pid}"
        if proc.pid is not None
        else f"the {proc.source} stack at {proc.at}"
    )
    ev.notes.append(f"{what} on {host or 'its node'} is taken to be rank {rank}: " + why)


def tie_by_waits(ev: Evidence, waiting: Collection[int], known: Collection[int]) -> None:
    """Tie, host by host, the one untied process outside collectives to the one untied rank
    shown waiting in none, where every other untied rank of that host is shown waiting in one
    (`waiting`, among the ranks whose state is `known`: the dumps' verdict, or DETAIL's
    entered collectives, which the joining step does not have). A host whose untied
    processes and ranks differ in number, or with a rank of unknown state, ties nothing."""
    procs_on, free_on = untied_on_hosts(ev)
    for host, procs in procs_on.items():
        free = free_on.get(host, [])
        if not all(r.rank in known for r in free):
            continue
        pair = _lone_idle(procs, free, lambda r: r.rank in waiting)
        if pair is not None:
            _adopt(ev, *pair, LONE_IDLE)
    # where no input ties the ranks to hosts, the job's untied processes and ranks as a whole
    # (a rank whose host is known stays on it)
    procs = worker_processes(ev)
    free = [r for r in ev.ranks.values() if r.stack is None]
    if free and all(r.rank in known for r in free):
        pair = _lone_idle(procs, free, lambda r: r.rank in waiting)
        if pair is not None and short_host(pair[1].host or pair[0].host) == short_host(
            pair[0].host
        ):
            _adopt(ev, *pair, LONE_IDLE_JOB)


def worker_processes(ev: Evidence) -> list[ProcessStack]:
    """The py-spy'd processes no input ties to a rank that are workers (`is_worker`)."""
    return [p for p in ev.unmatched if is_worker(p)]


def is_worker(proc: ProcessStack) -> bool:
    """A process that may be a rank: not torchrun's agent, not a helper of a worker
    (is_auxiliary)."""
    return not proc.is_agent and not is_auxiliary(proc)


def untied_on_hosts(
    ev: Evidence,
) -> tuple[dict[str, list[ProcessStack]], dict[str, list[RankEvidence]]]:
    """By short host name, the untied worker processes and the ranks with no stack: the two
    sides any elimination on a host matches (a process or rank with no host is in neither)."""
    procs_on: dict[str, list[ProcessStack]] = defaultdict(list)
    for p in worker_processes(ev):
        if p.host:
            procs_on[short_host(p.host)].append(p)
    free_on: dict[str, list[RankEvidence]] = defaultdict(list)
    for r in ev.ranks.values():
        if r.stack is None and r.host:
            free_on[short_host(r.host)].append(r)
    return procs_on, free_on


LONE_IDLE = "the one process of that host outside collectives, and its one rank waiting in none"
LONE_IDLE_JOB = "the one process of the job outside collectives, and its one rank waiting in none"


def _lone_idle(
    procs: list[ProcessStack], free: list[RankEvidence], waits: Callable[[RankEvidence], bool]
) -> tuple[ProcessStack, RankEvidence] | None:
    """Of a host's untied processes and untied ranks, as many of each, the one process whose
    live stack is outside collectives and the one rank not shown waiting (`waits`): the
    same process, since every other process waits where a rank of the host does."""
    if len(procs) != len(free):
        return None
    outside = [p for p in procs if in_collective(p) is None]
    idle = [r for r in free if not waits(r)]
    return (outside[0], idle[0]) if len(outside) == 1 == len(idle) else None


# Python processes of a node that are no ranks: DataLoader workers, multiprocessing's helpers,
# compile workers (the code each was started to run says so: is_auxiliary).
_PROCESS_RUN = re.compile(r"(?:^|/)multiprocessing/process\.py$")
_AUX_FILES = re.compile(
    r"torch/utils/data/_utils/|multiprocessing/(?:resource_tracker|forkserver|popen_)"
    r"|concurrent/futures/process\.py|torch/_inductor/compile_worker"
)


def is_auxiliary(proc: ProcessStack) -> bool:
    """A Python process of the node that is no rank (a DataLoader worker, a helper), by
    the code it was started to run: a multiprocessing child's target, the frame inside its
    innermost frame of multiprocessing/process.py (`BaseProcess.run`; a forked child keeps its
    parent's frames down to the fork above it, so its outermost frame is the trainer's
    `<module>`: seen in py-spy dumps of torch 2.13's DataLoader workers), else its outermost
    frame, or the one a `python -c` string calls (multiprocessing's resource tracker and
    forkserver)."""
    main = proc.main
    if main is None:
        return False
    frames = main.python_frames
    if not frames:
        return False
    entries = [frames[-1]]
    if len(frames) > 1 and frames[-1].file == "<string>":
        entries.append(frames[-2])
    runs = [i for i, f in enumerate(frames) if _PROCESS_RUN.search(f.file.replace("\\", "/"))]
    if runs and runs[0] > 0:
        entries.append(frames[runs[0] - 1])
    return any(_AUX_FILES.search(f.file.replace("\\", "/")) for f in entries)


def _on(proc: ProcessStack, host: str) -> ProcessStack:
    return replace(proc, host=host)


def _stack_rank(join: _Join, node: Key, proc: ProcessStack) -> int | None:
    label = proc.label
    if label is not None and label.rank is not None:
        return label.rank
    if proc.pid is not None and (node, proc.pid) in join.pids:
        return join.pids[(node, proc.pid)]
    stated, local = stated_ranks(proc)
    if stated is not None:
        return stated
    return join.slots.get((node, local)) if local is not None else None


def stated_ranks(proc: ProcessStack) -> tuple[int | None, int | None]:
    """(global rank, local rank) a process's own `--locals` hold (RANK / LOCAL_RANK, else
    global_rank or rank / local_rank), None where they hold none."""
    named = dict(proc.locals)
    rank = next((named[k] for k in ("RANK", "global_rank", "rank") if k in named), None)
    local = next((named[k] for k in ("LOCAL_RANK", "local_rank") if k in named), None)
    return rank, local


def _take_stack(
    ev: Evidence, join: _Join, rank: int, node: Key, proc: ProcessStack, path: str
) -> None:
    r = _place(ev, join, rank, node, path)
    r.stack = proc if proc.host == r.host or not r.host else _on(proc, r.host)
    r.pid = r.pid or proc.pid
    label = proc.label
    if label is not None and label.local_rank is not None and r.local_rank is None:
        r.local_rank = label.local_rank


@dataclass
class _Residents:
    """The ranks each node holds (placed on it, or on its host) and the local ranks its slots
    name, indexed once for the elimination: scanning every rank and slot for each node made
    it quadratic in the job's size."""

    by_root: dict[Key, set[int]]
    by_host: dict[str, set[int]]
    locals_by_root: dict[Key, set[int]]

    @classmethod
    def of(cls, ev: Evidence, join: _Join) -> _Residents:
        out = cls(defaultdict(set), defaultdict(set), defaultdict(set))
        for r in ev.ranks.values():
            out.note(join, r)
        for n, local in join.slots:
            out.locals_by_root[join.nodes.find(n)].add(local)
        return out

    def note(self, join: _Join, r: RankEvidence) -> None:
        """File a rank under its node and its host as they stand now (after a stack is taken,
        a rank may have gained its host)."""
        if r.rank in join.rank_node:
            self.by_root[join.nodes.find(join.rank_node[r.rank])].add(r.rank)
        if r.host:
            self.by_host[r.host].add(r.rank)

    def on(self, node: Key, host: str) -> set[int]:
        """The ranks on a node: placed on it, or on its host ('' names none)."""
        return self.by_root.get(node, set()) | (self.by_host.get(host, set()) if host else set())


def _eliminate(
    ev: Evidence, join: _Join, residents: _Residents, node: Key, procs: list[ProcessStack]
) -> list[ProcessStack]:
    """Tie what is left on a node by elimination, where the evidence allows; return the
    processes still untied."""
    host = join.nodes.host(node)
    on_node = [ev.ranks[rank] for rank in sorted(residents.on(node, host))]
    free = [r for r in on_node if r.stack is None]
    matched = len(on_node) - len(free)

    def tie(proc: ProcessStack, r: RankEvidence, why: str) -> None:
        _take_stack(ev, join, r.rank, node, proc, proc.where.file)
        residents.note(join, r)
        _note_tie(ev, proc, host, r.rank, why)

    # A process inside the very call a rank's dump recorded last is that rank, where it is
    # the one rank of the node whose last call that was and the one process in it.
    recorded = {r.rank: call for r in free if (call := join.calls.get(r.rank)) is not None}
    live = [_live_call(p) for p in procs]
    ranks_at, procs_at = Counter(recorded.values()), Counter(c for c in live if c is not None)
    rank_at = {call: rank for rank, call in recorded.items()}  # where one rank made it
    for proc, call in zip(list(procs), live, strict=True):
        if call is None or not ranks_at[call] == procs_at[call] == 1:
            continue
        r = ev.ranks[rank_at[call]]
        where = f"{call[0]} at {call[1]} ({call[2]}:{call[3]})"
        tie(proc, r, f"its live stack is inside {where}, the call its dump recorded last")
        procs = [p for p in procs if p is not proc]
        free = [f for f in free if f is not r]
        matched += 1
    lone = len(procs) == 1 and len(free) == 1 and matched + 1 == len(on_node) > 1
    # the node's ranks are all known: its roster or its slots name that many
    if lone and len(residents.locals_by_root.get(node, ())) == len(on_node):
        tie(procs[0], free[0], "the one process and the one rank of that node left untied")
        return []

    # a rank whose last recorded call has as many processes of the node inside it as ranks
    # that made it last is waiting there, like a rank whose logs show it waiting
    def waits(r: RankEvidence) -> bool:
        call = recorded.get(r.rank)
        return bool(r.waits) or (call is not None and procs_at[call] >= ranks_at[call])

    pair = _lone_idle(procs, free, waits)
    if pair is not None:
        tie(*pair, LONE_IDLE)
        return [p for p in procs if p is not pair[0]]
    return procs


def _ending(logs: list[ParsedLog], join: _Join) -> Ending:
    """How the logs say the job ended: nodes whose agent logged success, slurm's cancels,
    nodes with a failure."""
    nodes = join.nodes
    succeeded: list[str] = []
    failed: list[str] = []
    cancelled: list[SlurmEvent] = []
    lost: list[str] = []
    for log in logs:
        for speaker, event in log.agent:
            node = _agent_node(nodes, log, speaker, event)
            host = nodes.host(node) or (str(node) if node is not None else log.input.path)
            if event.event == "succeeded" and host not in succeeded:
                succeeded.append(host)
            elif event.event == "failed" and host not in failed:
                failed.append(host)
            elif event.event == "store_lost" and host not in lost:
                lost.append(host)
        for speaker, exited in log.exits:
            node = _exit_node(nodes, log, speaker, exited)
            host = nodes.host(node) or (str(node) if node is not None else log.input.path)
            if host not in failed:
                failed.append(host)
        cancelled += [
            e for e in log.slurm if e.event in ("cancelled", "time_limit", "node_failure")
        ]
    counts = [r.nodes for log in logs for _s, r in log.rosters if r.nodes]
    signals = sorted({e.signal for log in logs for _s, e in log.agent if e.event == "signalled"})
    return Ending(
        tuple(succeeded),
        tuple(cancelled),
        tuple(failed),
        max(counts, default=None),
        tuple(signals),
        tuple(lost),
    )
