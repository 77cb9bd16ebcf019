"""Running frtrace and real jobs as separate processes, for the tests that need them."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

from builders import REPO


def child_env(
    extra: dict[str, str] | None = None, drop: tuple[str, ...] = ("TORCH_", "RANK")
) -> dict[str, str]:
    """This environment without the variables a job's own would leak in (`drop` prefixes),
    with this checkout first on the path, and `extra` set."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    env.update(extra or {})
    return env


def run_frtrace(
    *args: str, timeout: int, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """`python -m frtrace ARGS` in a process of its own."""
    return subprocess.run(
        [sys.executable, "-m", "frtrace", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=child_env() if env is None else env,
        check=False,
    )


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
