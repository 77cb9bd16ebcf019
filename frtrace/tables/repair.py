"""Work out who belongs to which process group, even when the dumps say it wrongly.

NCCL dumps carry a correct `pg_config`. torch 2.13's gloo dumps do not: a single key `''` with
empty names and empty or partial rank lists. Membership is then inferred from the other ranks'
configs and from which ranks recorded entries in each group; every inference is noted so that
`--verbose` can say what was guessed.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from frtrace.dumps.limits import budgets
from frtrace.ranks import rank_ranges
from frtrace.tables.check import unpack_ranks
from frtrace.tables.columns import RankColumns
from frtrace.tables.records import NUMEL_RATIOS, numel_rules
from frtrace.tables.table import Table, first_rows, group_max

DEFAULT_PG = "0"
DEFAULT_DESC = "default_pg"


GROUP_COLUMNS: dict[str, Any] = {
    "pg_name": object,
    "pg_desc": object,
    "ranks": object,
    "size": np.int64,
    "source": object,
}
STATUS_COLUMNS: dict[str, Any] = {
    "rank": np.int64,
    "pg_id": np.int64,
    "pg_name": object,
    "last_enqueued": np.int64,
    "last_started": np.int64,
    "last_completed": np.int64,
}


@dataclass(frozen=True)
class World:
    """How many ranks the job had, and whether a dump says so.

    NCCL dumps state every group's members in `pg_config` (the default group's is the world);
    torch 2.13's gloo dumps state the world in their `''`-keyed config only while the job has
    no sub-groups (`'[]'` after). Without that, the ranks seen bound the world from below:
    file names (unreadable files and gaps included), group members, an all_gather's size in
    the default group. A job whose world nothing states cannot be known whole: ranks past
    the highest one seen may have left nothing at all.
    """

    size: int  # ranks 0..size-1, as far as anything tells
    stated: bool  # a dump states the world's size (and no rank is seen past it)
    source: str  # what gives the size: "pg_config", "all_gather sizes" or "ranks seen"


NO_WORLD = World(0, False, "ranks seen")  # nothing seen yet


@dataclass
class GroupsSeen:
    """Which ranks recorded each group and the desc of each group's earliest row (rank first,
    then position): what infer_memberships reads of the entries besides size hints."""

    observed: dict[str, list[int]] = field(default_factory=dict)  # name -> ranks, ascending
    desc: dict[str, str] = field(default_factory=dict)

    def add(self, rank: int, groups: list[tuple[str, str]]) -> None:
        """One rank's groups (name, desc at its first row); ranks added in ascending order."""
        for name, desc in groups:
            ranks = self.observed.setdefault(name, [])
            if not ranks or ranks[-1] != rank:
                ranks.append(rank)
            self.desc.setdefault(name, desc)


def groups_seen(entries: Table) -> GroupsSeen:
    """GroupsSeen of a table ordered by rank, then position."""
    seen = GroupsSeen()
    if len(entries):
        pg, ranks = entries["pg_name"], entries["rank"]
        for i in first_rows(pg, ranks).tolist():
            seen.observed.setdefault(str(entries.label("pg_name", pg[i])), []).append(int(ranks[i]))
        # first seen first: the desc of a group's earliest row
        for i in sorted(first_rows(pg, entries["pg_desc"]).tolist()):
            seen.desc.setdefault(
                str(entries.label("pg_name", pg[i])),
                str(entries.label("pg_desc", entries["pg_desc"][i])),
            )
    return seen


@dataclass(frozen=True)
class FileGroups:
    """What one rank's file says of its groups, read from its own few thousand entries as
    it arrives (while other files are still being parsed), so that the job's table of
    millions of rows is not sorted for it afterwards."""

    rank: int
    groups: list[tuple[str, str]]  # (name, desc at the group's first row), first rows first
    status_names: dict[int, str]  # pg_id -> the name of the first row with that id


def file_groups(part: RankColumns) -> FileGroups:
    """FileGroups of one parsed file (before its columns are compacted)."""
    pg, desc = part.cats["pg_name"], part.cats["pg_desc"]
    rows = _first_rows_small(pg.codes, len(pg.uniques))
    groups = [
        (str(pg.uniques[c]), str(desc.uniques[d]))
        for c, d in zip(pg.codes[rows].tolist(), desc.codes[rows].tolist(), strict=True)
    ]
    ids = part.ints["pg_id"]
    lo = int(ids.min()) if len(ids) else 0
    span = int(ids.max()) - lo + 1 if len(ids) else 0
    at = _first_rows_small(ids - lo, span) if span <= 4 * len(ids) else np.sort(first_rows(ids))
    names = {
        int(i): str(pg.uniques[c])
        for i, c in zip(ids[at].tolist(), pg.codes[at].tolist(), strict=True)
    }
    return FileGroups(part.rank, groups, names)


def _first_rows_small(codes: np.ndarray, size: int) -> np.ndarray:
    """The first row of each value of `codes` (all in range(size)), in row order: one pass,
    no sort of the rows (a file's columns, a few distinct values each)."""
    n = len(codes)
    first = np.full(size, n, dtype=np.int64)
    np.minimum.at(first, codes, np.arange(n))
    return np.sort(first[first < n])


@dataclass
class Memberships:
    groups: Table  # GROUP_COLUMNS, one row per group
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    # pg_name -> the different member lists dumps give it (dumps of more than one job?)
    conflicts: dict[str, list[list[int]]] = field(default_factory=dict)
    world: World = NO_WORLD


def _size_hints(entries: Table) -> dict[str, int]:
    """Group sizes implied by all_gather / reduce_scatter numel ratios (output/input; which
    ops, per backend: frtrace.tables.records)."""
    hints: dict[str, int] = {}
    rules = numel_rules(entries)
    for rule, num, den in NUMEL_RATIOS:
        rows = np.flatnonzero((rules == rule) & (entries[den] > 0))
        if not len(rows):
            continue
        ratio = (entries[num][rows] // entries[den][rows]).astype(np.int64)
        best = group_max(entries["pg_name"][rows], ratio)
        for code, size in best.items():
            name = str(entries.label("pg_name", code))
            if int(size) <= budgets().max_rank + 1:  # a claimed size is not a reason to allocate
                hints[name] = max(hints.get(name, 0), int(size))
    return hints


def infer_memberships(
    entries: Table,
    parts: list[RankColumns],
    dumped_ranks: list[int],
    unreadable: list[int] | tuple[int, ...] = (),
    recorded: GroupsSeen | None = None,
) -> Memberships:
    """One row per group: name, desc, sorted global member ranks, and where they came from.
    `unreadable`: ranks whose file was found but could not be read (they still count).
    `recorded`: groups_seen(entries), when the files' FileGroups already told it."""
    notes: list[str] = []
    warnings: list[str] = []
    # Votes are counted on the packed lists (one bytes object per dump and group) and only the
    # distinct ones are unpacked: the world group's list is in every dump.
    packed_votes: dict[str, Counter[bytes]] = {}
    config_desc: dict[str, str] = {}
    anonymous: list[tuple[int, list[int]]] = []
    for part in parts:
        for key, cfg in part.pg_config.items():
            if not isinstance(cfg, dict):
                continue
            name = str(cfg.get("name") or key)
            packed = cfg.get("ranks")
            if not isinstance(packed, bytes):
                packed = None
            if name == "":
                anonymous.append((part.rank, list(unpack_ranks(packed)) if packed else []))
                continue
            if cfg.get("desc"):
                config_desc.setdefault(name, str(cfg["desc"]))
            if packed:
                packed_votes.setdefault(name, Counter())[packed] += 1
    config_votes = {
        name: Counter({unpack_ranks(p): n for p, n in votes.items()})
        for name, votes in packed_votes.items()
    }
    if anonymous:
        notes.append(
            f"{len(anonymous)} dump(s) carry a pg_config keyed by '' (torch gloo quirk); "
            "memberships are inferred from the other ranks and from the entries"
        )

    if recorded is None:
        recorded = groups_seen(entries)
    observed, desc_seen = recorded.observed, recorded.desc
    hints = _size_hints(entries) if len(entries) else {}

    known_ranks = set(dumped_ranks)
    for votes in config_votes.values():
        for voted in votes:
            known_ranks.update(voted)
    for _rank, listed in anonymous:
        known_ranks.update(listed)
    world = _world(known_ranks, set(unreadable), config_votes, config_desc, anonymous, hints)

    rows = []
    member_lists: list[list[int]] = []
    conflicts: dict[str, list[list[int]]] = {}
    for name in sorted(set(observed) | set(config_votes), key=_pg_sort_key):
        desc = config_desc.get(name) or desc_seen.get(name, "")
        seen = observed.get(name, [])
        if name in config_votes:
            votes = config_votes[name]
            members_t, _count = votes.most_common(1)[0]
            members = list(members_t)
            if len(votes) > 1:
                conflicts[name] = [list(v) for v, _n in votes.most_common()]
                warnings.append(
                    f"pg {name} ({desc}): dumps disagree on its members; using "
                    f"{rank_ranges(members)}"
                )
            extra = sorted(set(seen) - set(members))
            if extra:
                members = sorted(set(members) | set(extra))
                warnings.append(
                    f"pg {name} ({desc}): ranks {rank_ranges(extra)} recorded it but are not in "
                    "its pg_config; counted as members"
                )
            source = "pg_config"
        elif name == DEFAULT_PG or desc == DEFAULT_DESC:
            members = list(range(world.size))
            source = "inferred"
            notes.append(
                f"pg {name} ({desc}): default group, members 0..{world.size - 1} (every rank of "
                "the job)"
            )
        else:
            members = seen
            source = "inferred"
            notes.append(
                f"pg {name} ({desc}): members {rank_ranges(members)} inferred from the ranks "
                "that recorded it"
            )
            hint = hints.get(name, 0)
            if hint > len(members):
                warnings.append(
                    f"pg {name} ({desc}): its all_gather/reduce_scatter sizes imply {hint} "
                    f"members but only {len(members)} recorded it; the others are unknown"
                )
        member_lists.append(members)
        rows.append(
            {
                "pg_name": name,
                "pg_desc": desc,
                "ranks": members,
                "size": len(members),
                "source": source,
            }
        )
    for listed in member_lists:
        top = max(listed, default=-1) + 1
        if top > world.size:  # members seen past the stated world: it was not the whole
            world = World(top, False, "ranks seen")
    if not world.stated:
        notes.append(
            f"no dump states the job's world size; ranks 0..{world.size - 1} are seen "
            "(ranks past them would have left nothing)"
        )
    return Memberships(Table.from_records(rows, GROUP_COLUMNS), notes, warnings, conflicts, world)


def _world(
    known: set[int],
    unreadable: set[int],
    config_votes: dict[str, Counter],
    config_desc: dict[str, str],
    anonymous: list[tuple[int, list[int]]],
    hints: dict[str, int],
) -> World:
    """The job's world: stated by the default group's pg_config (NCCL), a gloo dump's
    `''`-keyed list (written whole only before sub-groups exist), or the default group's
    all_gather / reduce_scatter sizes; else bounded by the ranks seen, unreadable files'
    included. A stated world outweighs the names of files nobody could read: those past it
    are listed as unreadable, not counted as ranks of the job."""
    seen = max(known, default=-1) + 1
    stated: list[tuple[int, str]] = []
    for name, votes in config_votes.items():
        if name == DEFAULT_PG or config_desc.get(name) == DEFAULT_DESC:
            stated.append((max(len(v) for v in votes), "pg_config"))
    stated += [(len(listed), "pg_config") for _rank, listed in anonymous if listed]
    stated += [(hints[n], "all_gather sizes") for n in (DEFAULT_PG,) if hints.get(n, 0) > 0]
    if stated:
        size, source = max(stated)
        if size >= seen:
            return World(size, True, source)
    return World(max(seen, max(unreadable, default=-1) + 1), False, "ranks seen")


def _pg_sort_key(name: str) -> tuple[int, int, str]:
    numeric = name.isascii() and name.isdigit() and len(name) < 19
    return (0, int(name), "") if numeric else (1, 0, name)


def add_global_peers(entries: Table, groups: Table) -> None:
    """Translate p2p group-local src/dst into global ranks, vectorized over all groups."""
    n = len(entries)
    global_src = np.full(n, -1, dtype=np.int32)
    global_dst = np.full(n, -1, dtype=np.int32)
    if n and len(groups):
        cats = entries.labels["pg_name"]
        members_by_name = dict(zip(groups["pg_name"], groups["ranks"], strict=True))
        flat: list[int] = []
        offsets = np.zeros(len(cats), dtype=np.int64)
        sizes = np.zeros(len(cats), dtype=np.int64)
        for i, name in enumerate(cats):
            members = members_by_name.get(str(name), [])
            offsets[i], sizes[i] = len(flat), len(members)
            flat.extend(members)
        flat_arr = np.array(flat or [-1], dtype=np.int32)
        codes = entries["pg_name"]
        for local_col, out in (("src", global_src), ("dst", global_dst)):
            local = entries[local_col]
            rows = np.flatnonzero(local >= 0)  # p2p entries only: the others name no peer
            code, peer = codes[rows], local[rows]
            ok = peer < sizes[code]
            rows, code, peer = rows[ok], code[ok], peer[ok]
            out[rows] = flat_arr[offsets[code] + peer]
    entries["global_src"] = global_src
    entries["global_dst"] = global_dst


def status_names(entries: Table) -> dict[tuple[int, int], str]:
    """(rank, pg_id) -> the group name the rank's entries give that process-local id."""
    if not len(entries):
        return {}
    rank, ids, pg = entries["rank"], entries["pg_id"], entries["pg_name"]
    return {
        (int(rank[i]), int(ids[i])): str(entries.label("pg_name", pg[i]))
        for i in first_rows(rank, ids).tolist()
    }


def pg_status_table(parts: list[RankColumns], names: dict[tuple[int, int], str]) -> Table:
    """Per-rank pg_status rows, with the pg_id (per process) resolved to the group name
    (`names`: status_names of the entries)."""
    rows = []
    for part in parts:
        for key, status in part.pg_status.items():
            if not isinstance(status, dict):
                continue
            try:
                pg_id = int(key)
            except (TypeError, ValueError):
                continue
            rows.append(
                {
                    "rank": part.rank,
                    "pg_id": pg_id,
                    "pg_name": names.get((part.rank, pg_id), ""),
                    "last_enqueued": _as_int(status.get("last_enqueued_collective")),
                    "last_started": _as_int(status.get("last_started_collective")),
                    "last_completed": _as_int(status.get("last_completed_collective")),
                }
            )
    return Table.from_records(rows, STATUS_COLUMNS)


def _as_int(value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return -1
