"""Type stub of the C fast path (frtrace/tables/_fastdump.c)."""

from typing import Any

def parse(
    data: bytes | bytearray, max_entries: int, max_list_len: int, max_frames: int, /
) -> tuple[Any, ...] | None: ...
def release() -> None: ...
