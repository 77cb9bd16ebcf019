"""What an analyzer concludes: a finding names the culprit ranks and the evidence."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

KINDS = (
    "missing_ranks",
    "type_mismatch",
    "size_mismatch",
    "dtype_mismatch",
    "state_mismatch",
    "p2p_mismatch",
    "missing_dump",
    "order_cycle",
    "stuck_collective",
)


@dataclass
class Finding:
    """One problem, in the shape of the JSON report's <finding>."""

    kind: str
    pg_name: str
    pg_desc: str
    collective_seq_id: int | None
    p2p_seq_id: int | None
    op: str | None
    culprit_ranks: list[int]
    waiting_ranks: list[int]
    expected_ranks: list[int]
    detail: str
    evidence: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "pg_name": self.pg_name,
            "pg_desc": self.pg_desc,
            "collective_seq_id": self.collective_seq_id,
            "p2p_seq_id": self.p2p_seq_id,
            "op": self.op,
            "culprit_ranks": [int(r) for r in self.culprit_ranks],
            "waiting_ranks": [int(r) for r in self.waiting_ranks],
            "expected_ranks": [int(r) for r in self.expected_ranks],
            "detail": self.detail,
            "evidence": self.evidence,
        }

    def mark_consequence(self, culprits: list[int], detail: str) -> None:
        """Recast as a consequence of another finding: `culprits` did not issue it, the
        ranks that did are the ones waiting, and the verdict is no longer a tie to break."""
        self.culprit_ranks = sorted(culprits)
        self.waiting_ranks = sorted(set(self.evidence.get("issued_by", self.waiting_ranks)))
        self.evidence.pop("undecidable", None)
        self.evidence["secondary"] = True
        self.detail = detail

    @property
    def secondary(self) -> bool:
        """A consequence of another problem (the culprit is itself blocked elsewhere)."""
        return bool(self.evidence.get("secondary"))


def where(pg_desc: str, pg_name: str, seq: int | None, p2p: bool = False) -> str:
    """`mesh_tp#73 (pg 3)`: how findings name a collective for people."""
    label = pg_desc or f"pg {pg_name}"
    mark = "p2p#" if p2p else "#"
    seq_text = f"{mark}{seq}" if seq is not None and seq >= 0 else ""
    return f"{label}{seq_text}" + (f" (pg {pg_name})" if pg_desc else "")
