"""One bounded HTTP request to a rank's worker server.

The worker server (torch/csrc/distributed/c10d/control_plane/WorkerServer.cpp, the
`WorkerServer` constructor) answers `GET /handler/` with a JSON list of handler names and
`POST /handler/<name>` with what the handler wrote, status 404 for an unknown name and 500
when the handler throws. It has no authentication, so whatever answers at an address is
untrusted: a request has a deadline for the whole exchange (every read of its socket waits
only until then, so a server that sends one byte a second cannot stretch it), an answer has
a size bound (checked against Content-Length before reading, and while reading), a
redirect is an error (http.client follows none; its target is never contacted), and
nothing received is executed or interpreted here: bodies are written to files that the dump
and stack readers read under their own budgets. The host name is resolved before the
deadline applies (getaddrinfo cannot be cut short).
"""

from __future__ import annotations

import contextlib
import http.client
import os
import re
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_CHUNK = 1 << 16
_ERROR_BODY = 4096  # bytes of a failed answer read for its message
# A host name, an IPv4 address, or a bracketed IPv6 address: what `socket.gethostname()`
# gives, or an address a person types. No spaces (it goes into a label line), no userinfo.
_HOST = re.compile(r"^(?:[A-Za-z0-9_](?:[A-Za-z0-9_.-]{0,252})|\[[0-9A-Fa-f:.]{2,45}\])$")


class FetchError(Exception):
    """A request that brought no usable answer; `unreachable` when nothing HTTP came back
    (no connection, or no answer before the deadline)."""

    def __init__(self, message: str, unreachable: bool = False) -> None:
        super().__init__(message)
        self.unreachable = unreachable


@dataclass(frozen=True)
class Worker:
    """A rank's worker server: `http://<host>:<port>`, as the debug server registers it."""

    host: str
    port: int

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"


def parse_worker(text: str) -> Worker:
    """`http://host:port` (a trailing slash allowed) -> Worker; ValueError saying what is
    wrong otherwise. Only plain HTTP: the worker server speaks nothing else."""
    value = text.strip()
    if not value.lower().startswith("http://"):
        raise ValueError("not an http:// address")
    rest = value[len("http://") :].rstrip("/")
    if not rest or any(c in rest for c in "/?#@ \\"):
        raise ValueError("not of the form http://HOST:PORT")
    host, sep, port_text = rest.rpartition(":")
    if not sep or not port_text.isascii() or not port_text.isdigit() or len(port_text) > 5:
        raise ValueError("no port (http://HOST:PORT)")
    port = int(port_text)
    if not 0 < port < 65536 or not _HOST.match(host):
        raise ValueError("not of the form http://HOST:PORT")
    return Worker(host, port)


class _DeadlineSocket(socket.socket):
    """A socket whose every read waits at most until the deadline: a server that sends one
    byte a second, in its headers or its body, cannot stretch the exchange past it."""

    deadline = 0.0

    def recv_into(self, buffer: Any, nbytes: int = 0, flags: int = 0) -> int:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("deadline passed")
        self.settimeout(left)
        return super().recv_into(buffer, nbytes, flags)


class _Connection(http.client.HTTPConnection):
    """http.client's connection over a _DeadlineSocket."""

    def __init__(self, worker: Worker, deadline: float) -> None:
        super().__init__(worker.host.strip("[]"), worker.port)
        self.deadline = deadline

    def connect(self) -> None:
        error: OSError = OSError("no address")
        for family, kind, proto, _name, address in socket.getaddrinfo(
            self.host, self.port, type=socket.SOCK_STREAM
        ):
            sock = _DeadlineSocket(family, kind, proto)
            sock.deadline = self.deadline
            try:
                sock.settimeout(max(0.001, self.deadline - time.monotonic()))
                sock.connect(address)
            except OSError as exc:
                sock.close()
                error = exc
                continue
            self.sock = sock
            return
        raise error


def request(
    worker: Worker,
    method: str,
    path: str,
    deadline: float,
    limit: int,
    out: Path | None = None,
) -> bytes:
    """`method path` to the worker, done by `deadline` (time.monotonic()), its 200 answer
    at most `limit` bytes. With `out`, the body is streamed into that file (through a
    hidden `.part` file, renamed when whole) and b'' returned; else it is returned."""
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise FetchError("no time left before the deadline", unreachable=True)
    conn = _Connection(worker, deadline)
    try:
        try:
            conn.connect()
        except TimeoutError as exc:
            raise FetchError(f"no connection within {remaining:.1f} s", True) from exc
        except OSError as exc:
            raise FetchError(_os_reason(exc), unreachable=True) from exc
        conn.request(method, path, headers={"Connection": "close", "Accept-Encoding": "identity"})
        resp = conn.getresponse()
        _check_status(resp, limit)
        if out is None:
            return _read(resp, limit)
        _stream(resp, limit, out)
        return b""
    except FetchError:
        raise
    except TimeoutError as exc:
        raise FetchError(f"no whole answer within {remaining:.1f} s", unreachable=True) from exc
    except http.client.HTTPException as exc:
        raise FetchError(f"not an HTTP answer ({type(exc).__name__})") from exc
    except (OSError, ValueError) as exc:
        raise FetchError(_os_reason(exc) if isinstance(exc, OSError) else str(exc)[:200]) from exc
    finally:
        conn.close()


def _os_reason(exc: OSError) -> str:
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    return str(exc.strerror or exc)[:200] or type(exc).__name__


def _check_status(resp: http.client.HTTPResponse, limit: int) -> None:
    """A 200 answer within the size bound, or FetchError saying what came instead."""
    if 300 <= resp.status < 400:
        where = (resp.getheader("Location") or "")[:200]
        raise FetchError(f"HTTP {resp.status}: a redirect (to {where!r}), not followed")
    if resp.status != 200:
        text = resp.read(_ERROR_BODY).decode("utf-8", "replace").strip().splitlines()
        first = text[0][:200] if text else ""
        raise FetchError(f"HTTP {resp.status}" + (f" ({first})" if first else ""))
    length = resp.getheader("Content-Length")
    if length is not None and length.strip().isdigit() and int(length) > limit:
        raise FetchError(f"an answer of {int(length):,} bytes, over the limit of {limit:,}")


def _read(resp: http.client.HTTPResponse, limit: int) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while chunk := resp.read(_CHUNK):
        size += len(chunk)
        if size > limit:
            raise FetchError(f"an answer over the limit of {limit:,} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def _stream(resp: http.client.HTTPResponse, limit: int, out: Path) -> None:
    """The body into `out`, renamed into place only when whole."""
    part = out.with_name(f".{out.name}.part")
    size = 0
    try:
        with open(part, "wb") as f:
            while chunk := resp.read(_CHUNK):
                size += len(chunk)
                if size > limit:
                    raise FetchError(f"an answer over the limit of {limit:,} bytes")
                f.write(chunk)
        os.replace(part, out)
    finally:
        with contextlib.suppress(FileNotFoundError):
            part.unlink()
