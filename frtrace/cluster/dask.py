"""The Dask engine: dump files are parsed and columnized on a Dask cluster's workers.

The client lists the files (a folder, or a store through fsspec) and never reads a dump's
bytes: each task reads its partition of files where it runs (plan.parse_partition) and keeps
the columns there. What happens next is the distributed plan of frtrace.cluster.spread (the
analysis) or frtrace.cluster.assemble (Parquet); this module connects and submits the partitions.

dask.distributed is imported here only, on first use: `import frtrace` and `frtrace --help`
never import it.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import sys
import threading
from collections.abc import Iterator
from typing import Any

from frtrace.dumps.limits import budgets
from frtrace.errors import FrtraceError, first_line
from frtrace.tables.parse import ProgressCallback, tell
from frtrace.tables.partition import (
    Item,
    access_advice,
    lacks_access,
    parse_partition,
    partitions,
    unwrapped,
)
from frtrace.version import __version__

SCHEDULER_ENV = "DASK_SCHEDULER_ADDRESS"
TASKS_PER_WORKER = 4  # several tasks per worker even out files of different sizes
PART_FILES = 1024  # ...and no task reads more files: workers that join late get some
INSTALL_HINT = "pip install 'frtrace[dask]'"
WATCH_SECONDS = 2.0  # how often a run asks the scheduler how many workers it has
CONNECT_SECONDS = 15  # for a scheduler to answer (Dask's client also waits this long for it)
WAITING = "waiting for a Dask worker to join the scheduler"  # a scheduler with none yet
WAITING_AGAIN = "waiting for one to join (it reads again what the lost ones held)"  # none left
# What each worker is asked: the version its tasks will check against (frtrace.version).
_VERSION_OF_FRTRACE = "__import__('frtrace.version').version.__version__"


def _distributed() -> Any:
    try:
        import distributed
    except ImportError as exc:
        raise FrtraceError(f"--engine dask needs dask.distributed: {INSTALL_HINT}") from exc
    return distributed


@contextlib.contextmanager
def connect(
    scheduler: str | None = None,
    workers: int | None = None,
    progress: ProgressCallback | None = None,
) -> Iterator[Any]:
    """A client of the scheduler at `scheduler` (else $DASK_SCHEDULER_ADDRESS: an address, or
    the file the scheduler wrote), or of a local cluster of worker processes
    started for this run and stopped after it (`progress` hears which, as both take seconds)."""
    distributed = _distributed()
    address = scheduler or os.environ.get(SCHEDULER_ENV) or None
    if address and "://" not in address and (address.endswith(".json") or os.path.isfile(address)):
        address = scheduler_address(address)
    if address:
        check_address(address)
        tell(progress, "connecting to the Dask scheduler")
        knock(address)
        try:
            client = distributed.Client(
                address, timeout=f"{CONNECT_SECONDS}s", set_as_default=False
            )
        except (OSError, TimeoutError, ValueError) as exc:
            raise FrtraceError(f"cannot reach the Dask scheduler at {address}: {exc}") from exc
        with client, watching(client, progress, address):
            try:
                yield client
            except Exception as exc:
                if client.status == "running":
                    raise
                # the scheduler killed, or its node gone: Dask cancels every result at once
                # and names no cause ("FuturesCancelledError: 7 Futures cancelled:")
                raise scheduler_lost(address) from exc
        return
    n = workers or os.cpu_count() or 1
    tell(progress, f"starting a local Dask cluster of {n} worker processes")
    try:
        with _ignoring_ctrl_c():
            cluster = distributed.LocalCluster(
                n_workers=n,
                threads_per_worker=1,
                processes=True,
                dashboard_address=None,
                # its HTTP endpoints (health, metrics) on a free port: on the default one, a
                # dashboard already there (a notebook's) made Dask warn on stderr
                scheduler_kwargs={"dashboard_address": ":0"},
                # its workers' own errors too: a heartbeat missed while a loaded machine tears
                # the cluster down printed a traceback of Dask's after the report; a task's
                # failure still reaches the user, as one line (task_error)
                silence_logs=logging.CRITICAL,
            )
    except Exception as exc:  # Dask's own error names no cause
        raise FrtraceError(f"cannot start a local Dask cluster: {_start_failure(exc)}") from exc
    with (
        cluster,
        distributed.Client(cluster, set_as_default=False) as client,
        watching(client, progress, "the local cluster"),
    ):
        yield client


@contextlib.contextmanager
def watching(client: Any, progress: ProgressCallback | None, where: str) -> Iterator[None]:
    """While the run uses the cluster, a thread asks the scheduler every WATCH_SECONDS how
    many workers it has. When every worker is gone (preempted, or killed for memory) the
    tasks wait, silently, for one to join; `progress` hears of that wait, and of its end, as
    of the wait at the start (a notice: also a line off a terminal, for a batch log)."""
    if not callable(getattr(progress, "notice", None)):
        yield
        return
    stop = threading.Event()
    thread = threading.Thread(
        target=_watch, args=(client, progress, where, stop), name="frtrace-workers", daemon=True
    )
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(WATCH_SECONDS)


def _watch(client: Any, progress: Any, where: str, stop: threading.Event) -> None:
    noticed = False
    while not stop.wait(WATCH_SECONDS):
        if client.status != "running":
            return  # closing, or the scheduler lost: the run itself says so
        try:
            workers = int(client.scheduler_info(n_workers=0).get("n_workers", 1))
        except Exception:  # the scheduler lost meanwhile: as above
            return
        if stop.is_set():
            return
        if not workers and not noticed and _waiting(client):
            progress.notice(f"no Dask worker left at {where}; {WAITING_AGAIN}")
            noticed = True
        elif workers and noticed:
            progress.notice(f"a Dask worker joined {where}; going on")
            noticed = False


def _waiting(client: Any) -> bool:
    """Some task of this run not done yet. Else nothing waits for a worker: an adaptive
    cluster scales to none once idle, as while the report is written."""
    try:
        return any(state.status == "pending" for state in list(client.futures.values()))
    except RuntimeError:  # changed meanwhile
        return True


def _start_failure(exc: Exception) -> str:
    """Why a local cluster did not start, in a line. The usual cause: a script that starts
    one at its top level, as its worker processes import the script and start one again
    ("RuntimeError: Nanny failed to start.", each worker's traceback logged)."""
    said = first_line(exc)
    # a worker process imports the script as __mp_main__ (there, __main__ is Dask's own)
    main = sys.modules.get("__mp_main__") or sys.modules.get("__main__")
    script = str(getattr(main, "__file__", "") or "")
    hint = ""
    if script and "frtrace" not in script:  # not the command: a user's script
        hint = (
            f" (in a script such as {script}, start the run under `if __name__ == "
            "'__main__':`: Dask's worker processes import the script)"
        )
    return f"{type(exc).__name__}: {said}{hint}"


def scheduler_lost(address: str | None) -> FrtraceError:
    """The one line for a client whose scheduler went away mid-run."""
    return FrtraceError(
        f"lost the connection to the Dask scheduler at {address or 'its address'} (stopped, "
        "or its node went away): the work on its cluster is gone; run again once it is back"
    )


@contextlib.contextmanager
def _ignoring_ctrl_c() -> Iterator[None]:
    """Worker processes started within ignore SIGINT (they inherit it): a terminal's Ctrl-C
    reaches every process of the group, and each Dask worker printed two tracebacks as it
    died. The command stops them itself as it unwinds, with status 130. (A Ctrl-C in the
    seconds the cluster takes to start is lost.)"""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGINT)
    if previous is None:  # set outside Python: leave it
        yield
        return
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def check_address(address: str) -> None:
    """A malformed address fails here, in one line: Dask's Client, given one, raises only after
    it has started, and the half-built client then waits 30 s to close."""
    from distributed.comm.addressing import get_address_host_port, parse_address
    from distributed.comm.registry import get_backend

    try:
        scheme, _ = parse_address(address)
        if scheme in ("http", "https"):
            raise ValueError(
                "a web address, as the dashboard's; a scheduler's is tcp://, on port 8786 "
                "unless told otherwise"
            )
        get_backend(scheme)
        if scheme in ("tcp", "tls"):
            _, port = get_address_host_port(address)
            if not 0 < port < 65536:
                raise ValueError(f"port {port} out of range")
    except ValueError as exc:
        raise FrtraceError(
            f"not a Dask scheduler address: {address} ({exc}); give one like "
            "tcp://10.0.0.2:8786, or the file the scheduler wrote (--scheduler-file)"
        ) from exc


def knock(address: str, seconds: float = CONNECT_SECONDS) -> None:
    """A Dask scheduler answers at `address`, else one line. Given a port where something
    else listens (its dashboard's, 8787, is a common slip), Dask's Client waited forever for
    a handshake, and one where a server answered with other bytes made it allocate
    exabytes. In a thread of its own: a notebook's thread already runs an event loop."""
    import asyncio  # only for a named scheduler: asyncio costs a local run ~15 ms
    from concurrent.futures import ThreadPoolExecutor

    from distributed.comm import connect as dial
    from distributed.security import Security

    async def shake() -> None:
        args = Security().get_connection_args("client")
        # Dask's own timeout is for reaching the port; this one, a little longer, for the rest
        comm = await asyncio.wait_for(dial(address, timeout=seconds, **args), seconds + 5)
        await comm.close()

    default = "a scheduler listens on port 8786 unless told otherwise; 8787 is its dashboard"
    with ThreadPoolExecutor(1, thread_name_prefix="frtrace-knock") as pool:
        try:
            pool.submit(asyncio.run, shake()).result()
        except (asyncio.TimeoutError, TimeoutError) as exc:  # one class from Python 3.11
            raise FrtraceError(
                f"no Dask scheduler at {address}: something listens there, but did not answer "
                f"as one in {seconds + 5:.0f} s ({default})"
            ) from exc
        except OSError as exc:  # refused, or unroutable, for all that time
            raise FrtraceError(f"cannot reach the Dask scheduler at {address}: {exc}") from exc
        except Exception as exc:
            said = first_line(exc, 120)
            raise FrtraceError(
                f"no Dask scheduler at {address}: what answered there is not one "
                f"({type(exc).__name__}: {said}; {default})"
            ) from exc


def scheduler_address(path: str) -> str:
    """The address in the file a scheduler writes (`dask scheduler --scheduler-file F`): on
    Slurm the scheduler's node is known only once it runs, and the file is on shared storage."""
    try:
        with open(path, encoding="utf-8") as f:
            address = json.load(f).get("address")
    except FileNotFoundError as exc:
        raise FrtraceError(
            f"no Dask scheduler file at {path} (the scheduler writes it when started with "
            f"--scheduler-file {path})"
        ) from exc
    except (OSError, ValueError, AttributeError) as exc:
        raise FrtraceError(f"{path}: not a Dask scheduler file ({exc})") from exc
    if not isinstance(address, str) or not address:
        raise FrtraceError(f"{path}: not a Dask scheduler file (no address in it)")
    return address


def submit_partitions(
    client: Any,
    items: list[Item],
    remote: bool,
    storage_options: dict[str, Any],
    progress: ProgressCallback | None = None,
) -> tuple[list[list[Item]], list[Any], dict[str, str]]:
    """One parse task per partition of files (a few per worker, at most PART_FILES files
    each, in rank order): the partitions, their futures, and absolute paths mapped back to
    the paths as given."""
    workers = ready_workers(client, progress)
    items, given = absolute_items(items, remote)
    if items:
        check_access(client, items[0][0], remote, storage_options)
    count = max(workers * TASKS_PER_WORKER, -(-len(items) // PART_FILES))
    parts = partitions(items, count)
    limits = budgets()
    futures = [
        client.submit(
            parse_partition, part, remote, storage_options, limits, __version__, pure=False
        )
        for part in parts
    ]
    return parts, futures, given


def ready_workers(client: Any, progress: ProgressCallback | None = None) -> int:
    """How many workers the scheduler has, once it has one, each checked to run this version
    of frtrace.

    A cluster just asked for (dask-jobqueue's `scale` before Slurm starts the jobs) has none
    yet: partitions cut for one worker would be few and huge. And a worker without frtrace
    does not fail its task: it cannot read the task, drops its connection and dies, and the
    run would wait forever for workers that are gone.
    """
    if not client.scheduler_info(n_workers=-1).get("workers"):
        where = getattr(client.scheduler, "address", None)
        tell(progress, WAITING + (f" at {where}" if where else ""), lasting=True)
        client.wait_for_workers(1)
    # A builtin runs the check, so that the check itself can be read by a worker without
    # frtrace; the expression is this module's constant.
    answers = client.run(eval, _VERSION_OF_FRTRACE, on_error="return")
    broken = {w: a for w, a in answers.items() if isinstance(a, BaseException)}
    if broken:
        worker, error = sorted(broken.items())[0]
        raise FrtraceError(
            f"{len(broken)} of {len(answers)} Dask workers cannot import frtrace ({worker}: "
            f"{type(error).__name__}): install it, version {__version__} as here, where the "
            f"workers run (pip install 'frtrace[dask]=={__version__}')"
        )
    other = {w: a for w, a in answers.items() if a != __version__}
    if other:
        worker, version = sorted(other.items())[0]
        raise FrtraceError(
            f"{len(other)} of {len(answers)} Dask workers run frtrace {str(version)[:40]!r} "
            f"({worker}), this client {__version__}: install the same version on both"
        )
    return len(answers)


def check_access(client: Any, first: str, remote: bool, storage_options: dict[str, Any]) -> None:
    """Every worker can reach the job's first file, or one line saying which cannot and why:
    a worker without the shared folder, or without the store's credentials, would skip
    every file of its partitions with a line each (100,000 lines for a large job)."""
    answers = client.run(lacks_access, (first, 0), remote, storage_options, on_error="return")
    failed = {w: a for w, a in answers.items() if a is not None}
    if not failed:
        return
    worker, reason = sorted(failed.items())[0]
    if isinstance(reason, BaseException):
        detail = f"{type(reason).__name__}: {reason}"
    else:
        detail = unwrapped(str(reason))
    raise FrtraceError(
        f"{len(failed)} of {len(answers)} Dask workers cannot read {first} ({worker}: "
        f"{detail[:200]}): {access_advice(remote)}"
    )


def share(client: Any, obj: Any) -> Any:
    """`obj` as one task's result, for the tasks that all take it. Passed by value, it would
    be copied into every task's spec, and the scheduler keeps a task's spec for as long as its
    result is held (a partition's Context is, for the Trace's life): one copy of the job's
    groups and pg_status per partition, thousands of partitions on a large cluster. As a
    task's result, each spec holds its key and the scheduler one copy. Not scattered:
    scattered data is lost with the workers holding it, and a context lost with its worker is
    rebuilt from this task."""
    return client.submit(_same, obj, pure=False)


def homes(client: Any, futures: list[Any]) -> list[dict[str, Any]]:
    """Per future, the submit() options that run a task reading it on the worker holding it.
    Dask would weigh moving a partition (hundreds of MB) against a busy worker's queue, and a
    moved partition stays on both workers for as long as it is held. Loose: a task whose
    worker is gone runs where its input is made again."""
    held = client.who_has(futures)
    return [
        {"workers": list(held[f.key]), "allow_other_workers": True} if held.get(f.key) else {}
        for f in futures
    ]


def _same(obj: Any) -> Any:
    return obj


def release(futures: list[Any]) -> None:
    """Let the cluster drop these results (a partition's entries: hundreds of MB) now, not
    when the futures happen to be collected."""
    for future in futures:
        future.release()


def task_error(exc: BaseException) -> str:
    """One line for a failed task, with the usual cause of a cluster that cannot run them."""
    said = first_line(exc)
    if type(exc).__name__ == "KilledWorker":  # no error to show: the workers died
        # Dask's text goes on to name the last worker, past the 200 characters kept
        return (
            f"KilledWorker: {said.split('. ')[0]} (see the workers' logs: the usual "
            "causes are workers short of memory, or one that joined after the start without "
            f"frtrace {__version__})"
        )
    text = f"{type(exc).__name__}: {said}"
    if isinstance(exc, ImportError) and "frtrace" in str(exc):
        text += " (install frtrace, the same version, on every worker)"
    return text


def absolute_items(items: list[Item], remote: bool) -> tuple[list[Item], dict[str, str]]:
    """Workers may run in another folder or on another machine: they get absolute paths, and
    the mapping back to the paths as the user gave them, which the report shows."""
    if remote:
        return items, {}
    given = {os.path.abspath(path): path for path, _rank in items}
    return [(os.path.abspath(path), rank) for path, rank in items], given
