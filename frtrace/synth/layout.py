"""Megatron-style rank layout and the process groups a real job would create.

Group naming follows what torch does when every rank runs the same `new_group` calls:
pg_names are a global creation counter, so a given group has the same name on every
member, while pg_id is a per-process counter over the groups the rank actually joined.
"""

from __future__ import annotations

from dataclasses import dataclass, field

#: Group kinds in creation order; a kind's index is used as a compact key everywhere.
KINDS: tuple[str, ...] = ("default", "tp", "dp", "pp", "ep")
KIND_INDEX: dict[str, int] = {k: i for i, k in enumerate(KINDS)}
DESCS: tuple[str, ...] = ("default_pg", "mesh_tp", "mesh_dp", "mesh_pp", "mesh_ep")
NKINDS = len(KINDS)


@dataclass(frozen=True)
class Layout:
    """Tensor x data x pipeline parallel sizes; rank = pp*(dp*tp) + dp*tp + tp (Megatron order).

    `ep` > 1 adds MoE expert-parallel groups: each data-parallel group split into chunks of
    `ep` consecutive members, which exchange tokens with uneven all_to_all.
    """

    tp: int = 1
    dp: int = 1
    pp: int = 1
    ep: int = 1

    def __post_init__(self) -> None:
        for name in ("tp", "dp", "pp", "ep"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"Layout.{name} must be an int >= 1, got {value!r}")
        if self.dp % self.ep:
            raise ValueError(f"Layout.ep ({self.ep}) must divide dp ({self.dp})")

    @property
    def world(self) -> int:
        return self.tp * self.dp * self.pp

    def coords(self, rank: int) -> tuple[int, int, int]:
        """(pp_idx, dp_idx, tp_idx) of a global rank."""
        if not 0 <= rank < self.world:
            raise ValueError(f"rank {rank} outside world of {self.world}")
        pp_idx, rest = divmod(rank, self.dp * self.tp)
        dp_idx, tp_idx = divmod(rest, self.tp)
        return pp_idx, dp_idx, tp_idx

    def rank_of(self, pp_idx: int, dp_idx: int, tp_idx: int) -> int:
        return pp_idx * self.dp * self.tp + dp_idx * self.tp + tp_idx

    def size_of(self, kind: str) -> int:
        """Members of one group of that kind."""
        sizes = {"default": self.world, "tp": self.tp, "dp": self.dp, "pp": self.pp, "ep": self.ep}
        return sizes[kind]

    def has(self, kind: str) -> bool:
        """Whether the job creates groups of that kind (torch-like jobs skip size-1 meshes)."""
        return kind == "default" or self.size_of(kind) > 1


@dataclass(frozen=True)
class Group:
    """One process group; `gid` doubles as its global pg_name."""

    gid: int
    kind: int
    ranks: tuple[int, ...]

    @property
    def pg_name(self) -> str:
        return str(self.gid)

    @property
    def desc(self) -> str:
        return DESCS[self.kind]

    def local_rank(self, rank: int) -> int:
        # Groups are arithmetic progressions, so the index is computable without a search.
        if len(self.ranks) == 1:
            return 0
        return (rank - self.ranks[0]) // (self.ranks[1] - self.ranks[0])


@dataclass
class GroupTable:
    """All groups of a layout plus O(1) lookups from (rank, kind) to the group."""

    layout: Layout
    groups: list[Group] = field(default_factory=list)
    _first: list[int] = field(default_factory=lambda: [0] + [-1] * (NKINDS - 1))
    pg_ids: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        lay = self.layout
        world, tp, dp, pp = lay.world, lay.tp, lay.dp, lay.pp
        self.groups = [Group(0, 0, tuple(range(world)))]
        pg_ids = [0] + [-1] * (NKINDS - 1)
        next_pg_id = 1
        if lay.has("tp"):
            self._first[1] = len(self.groups)
            pg_ids[1] = next_pg_id
            next_pg_id += 1
            for i in range(world // tp):
                self.groups.append(Group(len(self.groups), 1, tuple(range(i * tp, (i + 1) * tp))))
        if lay.has("dp"):
            self._first[2] = len(self.groups)
            pg_ids[2] = next_pg_id
            next_pg_id += 1
            for p in range(pp):
                for t in range(tp):
                    start = p * dp * tp + t
                    members = tuple(range(start, (p + 1) * dp * tp, tp))
                    self.groups.append(Group(len(self.groups), 2, members))
        if lay.has("pp"):
            self._first[3] = len(self.groups)
            pg_ids[3] = next_pg_id
            next_pg_id += 1
            stride = world // pp
            for i in range(stride):
                self.groups.append(Group(len(self.groups), 3, tuple(range(i, world, stride))))
        if lay.has("ep"):
            self._first[4] = len(self.groups)
            pg_ids[4] = next_pg_id
            for p in range(pp):
                for t in range(tp):
                    dp_members = range(p * dp * tp + t, (p + 1) * dp * tp, tp)
                    for c in range(0, dp, lay.ep):
                        chunk = tuple(dp_members[c : c + lay.ep])
                        self.groups.append(Group(len(self.groups), 4, chunk))
        self.pg_ids = tuple(pg_ids)

    def gid(self, rank: int, kind: int) -> int:
        """Global index of `rank`'s group of `kind`, or -1 when the layout has none."""
        first = self._first[kind]
        if kind == 0:
            return 0
        if first < 0:
            return -1
        lay = self.layout
        pp_idx, dp_idx, tp_idx = lay.coords(rank)
        if kind == 1:
            return first + rank // lay.tp
        if kind == 2:
            return first + pp_idx * lay.tp + tp_idx
        if kind == 4:
            chunks = lay.dp // lay.ep
            return first + (pp_idx * lay.tp + tp_idx) * chunks + dp_idx // lay.ep
        return first + dp_idx * lay.tp + tp_idx

    def group(self, rank: int, kind: int) -> Group:
        gid = self.gid(rank, kind)
        if gid < 0:
            raise ValueError(f"layout {self.layout} has no {KINDS[kind]!r} groups")
        return self.groups[gid]

    def present_kinds(self) -> list[int]:
        return [k for k in range(NKINDS) if self.pg_ids[k] >= 0]

    def as_mapping(self) -> dict[str, tuple[str, list[int]]]:
        """pg_name -> (desc, sorted global ranks), the shape SyntheticJob.groups exposes."""
        return {g.pg_name: (g.desc, list(g.ranks)) for g in self.groups}
