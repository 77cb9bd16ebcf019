"""Reading dumps from object storage: wall time from a folder against the same dumps in S3.

A real S3 API (moto's server) runs on 127.0.0.1; between it and frtrace sits a proxy that
delays every byte the store sends by --latency-ms, as a store across a network does (its
bandwidth is not limited). frtrace runs with each engine on the folder and on the s3:// URL,
and the reports must be the same.

    .venv/bin/python scripts/store_bench.py .bench-cache/g2-r1024-.../dumps --latency-ms 20

Needs the test extras (moto, s3fs): scripts/check.sh installs them.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import logging
import os
import socket
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

BUCKET = "bench"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def delaying_proxy(listen: int, target: int, delay: float) -> None:
    """Forward 127.0.0.1:listen to :target in a thread, each chunk from the store sent `delay`
    seconds after it arrived (queued, so the delay adds latency, not a bandwidth cap)."""

    async def pump(reader: Any, writer: Any, wait: float) -> None:
        queue: asyncio.Queue[tuple[float, bytes | None]] = asyncio.Queue()

        async def send() -> None:
            while True:
                due, data = await queue.get()
                if data is None:
                    break
                await asyncio.sleep(max(0.0, due - time.monotonic()))
                writer.write(data)
                await writer.drain()
            writer.close()

        sender = asyncio.create_task(send())
        try:
            while data := await reader.read(1 << 16):
                await queue.put((time.monotonic() + wait, data))
        except ConnectionError:
            pass
        await queue.put((0.0, None))
        await sender

    async def handle(client_r: Any, client_w: Any) -> None:
        store_r, store_w = await asyncio.open_connection("127.0.0.1", target)
        await asyncio.gather(
            pump(client_r, store_w, 0.0), pump(store_r, client_w, delay), return_exceptions=True
        )

    async def serve() -> None:
        server = await asyncio.start_server(handle, "127.0.0.1", listen)
        async with server:
            await server.serve_forever()

    threading.Thread(target=asyncio.run, args=(serve(),), daemon=True).start()


def run(args: list[str], env: dict[str, str]) -> tuple[float, str, int]:
    """Wall seconds, the report's digest (trace_dir left out) and the exit status."""
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "frtrace", *args, "--format", "json"],
        capture_output=True,
        text=True,
        env=env,
    )
    wall = time.monotonic() - started
    if done.returncode not in (0, 1):
        sys.exit(f"frtrace {' '.join(args)} failed ({done.returncode}): {done.stderr[-500:]}")
    report = json.loads(done.stdout)
    report["inputs"].pop("trace_dir", None)
    digest = hashlib.sha256(json.dumps(report, sort_keys=True).encode()).hexdigest()[:12]
    return wall, digest, done.returncode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dumps", type=Path, help="a folder of dumps (e.g. from scripts/bench.py)")
    parser.add_argument("--latency-ms", type=float, default=20.0)
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    options = parser.parse_args()

    from moto.server import ThreadedMotoServer
    from s3fs import S3FileSystem

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # a line per request, 2,000 a run
    store, proxy = free_port(), free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=store, verbose=False)
    server.start()
    delaying_proxy(proxy, store, options.latency_ms / 1000)
    keys = {"AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench"}
    fs = S3FileSystem(endpoint_url=f"http://127.0.0.1:{store}", key="bench", secret="bench")
    fs.mkdir(BUCKET)
    files = sorted(p for p in options.dumps.iterdir() if p.is_file())
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda p: fs.pipe(f"{BUCKET}/job/{p.name}", p.read_bytes()), files))
    size = sum(p.stat().st_size for p in files)
    print(f"{len(files)} dumps, {size / 1e6:,.0f} MB; store latency {options.latency_ms:g} ms")

    env = {**os.environ, **keys, "FSSPEC_S3_ENDPOINT_URL": f"http://127.0.0.1:{proxy}"}
    dask = ["--engine", "dask", "--jobs", str(options.jobs)]
    rows = []
    for engine, extra in (("local", ["--jobs", str(options.jobs)]), ("dask", dask)):
        for source in (str(options.dumps), f"s3://{BUCKET}/job/"):
            wall, digest, code = run([source, *extra], env)
            rows.append((engine, "folder" if source == str(options.dumps) else "s3", wall, digest))
            print(f"{engine:6} {rows[-1][1]:7} {wall:7.1f} s  exit {code}  report {digest}")
    server.stop()
    if len({digest for *_rest, digest in rows}) != 1:
        sys.exit("the reports differ")
    print("identical reports")


if __name__ == "__main__":
    main()
