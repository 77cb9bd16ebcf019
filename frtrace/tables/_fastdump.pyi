"""Type stub of the C fast path (frtrace/tables/_fastdump.c)."""

from typing import Any

# The fields parse() reads, in its order: an entry's, then a frame's; the first N_INTS of
# FIELDS are the integers it returns (columns.FAST_LAYOUT must agree for the module to be used).
FIELDS: tuple[str, ...]
FRAME_FIELDS: tuple[str, ...]
N_INTS: int

def parse(
    data: bytes | bytearray, max_entries: int, max_list_len: int, max_frames: int, /
) -> tuple[Any, ...] | None: ...
def release() -> None: ...
