"""`frtrace collect`, `frtrace history` and `frtrace live`: subcommands beside the analysis.

`frtrace` with a first argument `collect`, `history` or `live` runs these (frtrace.cli.main
picks them before the analysis' options are parsed); anything else is the analysis, so a
folder literally named `collect` is analyzed as `frtrace ./collect` (or `frtrace -- collect`).
collect and history import neither numpy nor pandas. `live` writes what it fetched into a
folder and hands it to the analysis of `frtrace DIR`, which frtrace.cli passes in (it is the
layer above). Results go to stdout, progress and warnings to stderr.
"""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path
from typing import Any

import click

# Each subcommand imports its own modules when it runs: the analysis command, which imports
# this module on every run, pays for none of them.
from frtrace.errors import first_line
from frtrace.exits import quiet_broken_pipe

SUBCOMMANDS = ("collect", "history", "live")
EXIT_OK, EXIT_PARTIAL, EXIT_UNUSABLE, EXIT_INTERNAL, EXIT_PYSPY = 0, 1, 2, 3, 4
_CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}

COLLECT_EPILOG = """\b
Examples (one line for every node of the job; %h becomes each node's short host name):
  srun --overlap --jobid=$JOB --nodes=$N --ntasks-per-node=1 \\
      frtrace collect /shared/incident-42/%h
  pdsh -w node[01-16] frtrace collect /shared/incident-42/%h
  frtrace collect /tmp/here --fresh-dump      also ask every rank for a fresh dump
  frtrace /shared/incident-42                 then analyze every node's dumps at once

\b
Writes into OUT: pyspy_<host>.txt (each process's `py-spy dump` after a line
`# frtrace-collect rank=R local_rank=L host=H pid=P`), the ranks' Flight Recorder dumps
(copied under their own names), fresh_trace_rank_<R>[.json] with --fresh-dump, and
collect.json (what was found, written and what failed). See docs/collect.md.

\b
Exit status:
  0  every rank's stack and dump collected
  1  partly: a stack, a dump copy or a fresh dump failed (each said on stderr)
  2  usage error, OUT not writable, or nothing found (no training process, no dump)
  3  internal error (rerun with --debug for a traceback)
  4  py-spy is not installed or may not attach (ptrace); dumps are still copied
"""


def _run(action: Any, debug: bool) -> None:
    """Run a subcommand's body: its exit status, or one line and status 3 for a bug."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(AttributeError, ValueError, OSError):
            stream.reconfigure(errors="backslashreplace")  # type: ignore[union-attr]
    try:
        code = action()
        sys.stdout.flush()
    except BrokenPipeError:
        quiet_broken_pipe()
    except KeyboardInterrupt:
        sys.exit(130)
    except Exception as exc:
        if debug:
            raise
        click.echo(
            f"frtrace: error: internal error: {type(exc).__name__}: {first_line(exc)} "
            "(rerun with --debug for a traceback)",
            err=True,
        )
        sys.exit(EXIT_INTERNAL)
    sys.exit(code)


def _error(message: str) -> None:
    from frtrace.report.fmt import safe

    click.echo(f"frtrace: error: {safe(message)}", err=True)


@click.command(
    "collect",
    context_settings=_CONTEXT,
    epilog=COLLECT_EPILOG,
    short_help="Gather this node's stacks and dumps of a hung job.",
)
@click.argument("out", metavar="OUT")
@click.option("--native", is_flag=True, help="py-spy --native: C/C++ frames too.")
@click.option(
    "--subprocesses",
    is_flag=True,
    help="py-spy --subprocesses: a rank's child processes (data loader workers) in its block.",
)
@click.option(
    "--fresh-dump",
    "fresh",
    is_flag=True,
    help="Also ask each running rank for a fresh dump, where the job enabled a way.",
)
@click.option(
    "--under",
    type=click.IntRange(min=1),
    metavar="PID",
    help="Only this process and those below it (a torchrun agent, a Slurm step).",
)
@click.option(
    "--prefix",
    "prefixes",
    multiple=True,
    metavar="PREFIX",
    help="Also copy every dump <PREFIX><rank> found (repeatable).",
)
@click.option(
    "--rank-var",
    default="RANK",
    show_default=True,
    metavar="NAME",
    help="The environment variable holding a process's global rank.",
)
@click.option(
    "--timeout",
    type=click.FloatRange(min=0.1),
    default=60.0,
    show_default=True,
    metavar="SECONDS",
    help="Longest wait for one py-spy.",
)
@click.option(
    "--fresh-timeout",
    type=click.FloatRange(min=0.1),
    default=15.0,
    show_default=True,
    metavar="SECONDS",
    help="Longest wait for one rank's fresh dump.",
)
@click.option("--py-spy", "pyspy", metavar="PATH", help="The py-spy to run [default: on PATH].")
@click.option("--debug", is_flag=True, help="Show Python tracebacks of internal errors.")
def collect_command(out: str, debug: bool, **options: Any) -> None:
    """Gather what a hung job leaves on this node into OUT: every training process's py-spy
    stack labeled with its rank, the Flight Recorder dumps, a manifest.

    Training processes are those with RANK in their environment (torchrun sets it).
    Neither torch nor numpy is needed.
    """
    _run(lambda: _collect(out, options), debug)


def _collect(out: str, options: dict[str, Any]) -> int:
    from frtrace.collect.run import Options, collect, expand_out, short_host
    from frtrace.report import collect_report

    host = short_host()
    target = expand_out(out, host)
    if target.exists() and not target.is_dir():
        _error(f"{target} is not a folder (OUT is the folder collect writes into)")
        return EXIT_UNUSABLE
    try:
        done = collect(
            Options(
                out=target,
                native=options["native"],
                subprocesses=options["subprocesses"],
                fresh=options["fresh"],
                timeout=options["timeout"],
                fresh_timeout=options["fresh_timeout"],
                under=options["under"],
                rank_var=options["rank_var"],
                prefixes=tuple(options["prefixes"]),
                pyspy=options["pyspy"],
            ),
            host,
        )
        collect_report.write_manifest(done)
    except OSError as exc:
        _error(f"cannot write into {exc.filename or target}: {exc.strerror or exc}")
        return EXIT_UNUSABLE
    for line in collect_report.stderr_lines(done):
        click.echo(line, err=True)
    click.echo(collect_report.summary(done))
    problem = collect_report.pyspy_problem(done)
    if problem is not None:
        _error(problem)
        return EXIT_PYSPY
    if not done.found.processes and not done.dumps:
        _error("nothing to collect on this host: no training process and no dump")
        return EXIT_UNUSABLE
    partial = (
        any(s.failure for _p, s in done.stacks)
        or any(c.failure for c in done.dumps)
        or any(r.failure for _p, r in done.fresh)
    )
    return EXIT_PARTIAL if partial else EXIT_OK


HISTORY_EPILOG = """\b
Examples:
  frtrace /shared/incident-42 -o /shared/incident-42/report.json   one report per incident
  frtrace history /shared/incidents/     every report.json in the incident folders below
  frtrace history reports/*.json --kind missing_ranks --format json

\b
A report is a JSON report of frtrace (frtrace.report/1). A culprit rank's host comes from
the report's root_cause.hosts, else the collect.json files frtrace collect left in the dump
folder the report names, else that folder's dump paths (nodeB/trace_3). See docs/history.md.

\b
Exit status:
  0  the reports were read (whatever they found)
  2  usage error, or no usable report
  3  internal error (rerun with --debug for a traceback)
"""


@click.command(
    "history",
    context_settings=_CONTEXT,
    epilog=HISTORY_EPILOG,
    short_help="Which hosts and ranks broke jobs, over many reports.",
)
@click.argument("reports", nargs=-1, required=True, metavar="REPORT_OR_FOLDER...")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["table", "json"]),
    default="table",
    show_default=True,
    help="A table, or the same as JSON.",
)
@click.option(
    "--kind",
    "kinds",
    multiple=True,
    metavar="KIND",
    help="Only incidents whose root cause is of this kind (repeatable).",
)
@click.option("--debug", is_flag=True, help="Show Python tracebacks of internal errors.")
def history_command(
    reports: tuple[str, ...], fmt: str, kinds: tuple[str, ...], debug: bool
) -> None:
    """Which hosts and ranks were the culprit of hung jobs, how often, of which kind, first
    and last seen: from many frtrace JSON reports, or folders of incident folders holding
    them. The host named most often comes first.
    """
    _run(lambda: _history(reports, fmt, kinds), debug)


def _history(reports: tuple[str, ...], fmt: str, kinds: tuple[str, ...]) -> int:
    from frtrace.history import history
    from frtrace.report import history_report

    hist = history(reports, kinds)
    for line in history_report.skipped_lines(hist):
        click.echo(line, err=True)
    if not hist.incidents:
        _error("no frtrace report found in " + ", ".join(reports))
        return EXIT_UNUSABLE
    if fmt == "json":
        sys.stdout.write(history_report.render_json(hist))
    else:
        sys.stdout.write(history_report.render_text(hist))
    return EXIT_OK


LIVE_EPILOG = """\b
Examples (from any machine that reaches the job's nodes; nothing is copied):
  frtrace live                           the job of $MASTER_ADDR:$MASTER_PORT, as its ranks see it
  frtrace live --store node01:29500      the job whose TCPStore listens there (needs torch)
  frtrace live --worker http://node01:41235 --worker http://node02:38811
                                         each rank's worker server, rank 0 first (no torch)
  frtrace live --worker 3=http://node02:38811   one rank, named
  frtrace live --watch 10                ask every 10 s until nothing moves (Ctrl-C stops)
  frtrace live --save /shared/inc-42     keep what was fetched; later: frtrace /shared/inc-42

\b
The job must have called torch.distributed.debug.start_debug_server() after
init_process_group (torch 2.10 and later; frtrace.capture.start_debug_server wraps it). Its
servers have no authentication: trusted networks only. See docs/live.md.

\b
Exit status: as `frtrace DIR` (0 OK, 1 HUNG/FAILED/STOPPED, 4 UNKNOWN: a rank that did not
answer counts as unseen), 2 usage error or no rank answered, 3 internal error, 130 Ctrl-C.
"""


@click.command(
    "live",
    context_settings=_CONTEXT,
    epilog=LIVE_EPILOG,
    short_help="Diagnose a running job over PyTorch's debug server.",
)
@click.option(
    "--store",
    metavar="HOST:PORT",
    help="The job's TCPStore, where each rank registered its worker server; reading it needs "
    "torch [default: $MASTER_ADDR:$MASTER_PORT].",
)
@click.option(
    "--worker",
    "workers",
    multiple=True,
    metavar="[RANK=]URL",
    help="A rank's worker server, http://HOST:PORT (repeatable; without RANK=, the n-th "
    "--worker is rank n-1). Needs no torch.",
)
@click.option(
    "--timeout",
    type=click.FloatRange(min=0.1),
    default=10.0,
    show_default=True,
    metavar="SECONDS",
    help="Longest wait for one rank's answers (its recorder and its stacks).",
)
@click.option(
    "--watch",
    type=click.FloatRange(min=0.1),
    default=None,
    metavar="SECONDS",
    help="Ask again every SECONDS, saying what moved; stop with the verdict once nothing "
    "moves and the root cause stays the same (or on Ctrl-C).",
)
@click.option(
    "--rounds",
    type=click.IntRange(min=2),
    default=None,
    metavar="N",
    help="With --watch: at most N rounds, then the verdict.",
)
@click.option(
    "--save",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    metavar="DIR",
    help="Keep what was fetched in DIR (a new or empty folder) as dump and stack files, for "
    "`frtrace DIR` later; with --watch, one folder DIR/round-<k> per round.",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["table", "json"]),
    default="table",
    show_default=True,
    help="Text report or the JSON report.",
)
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Also write the JSON report to this file.",
)
@click.option(
    "--html",
    "html_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Also write the report as one self-contained HTML page to this file.",
)
@click.option("--print-stack-trace", "stacks", is_flag=True, help="Show whole stacks.")
@click.option(
    "--world-size",
    type=click.IntRange(min=1),
    default=None,
    metavar="N",
    help="The job's rank count, where no dump states it (as for `frtrace DIR`).",
)
@click.option("-v", "--verbose", is_flag=True, help="Say what was inferred and repaired.")
@click.option("--debug", is_flag=True, help="Show Python tracebacks of internal errors.")
@click.pass_obj
def live_command(report: Any, debug: bool, **options: Any) -> None:
    """Diagnose a job while it hangs: ask every rank's debug server (PyTorch's
    torch.distributed.debug) for its Flight Recorder and its stacks, then analyze them as
    `frtrace DIR` analyzes dumps, with each rank's live stack in the report.
    """
    options["debug"] = debug
    _run(lambda: _live(options, report), debug)


def _live(options: dict[str, Any], report: Any) -> int:
    """Fetch, write, then the analysis of `frtrace DIR` on what was written (`report`
    exits with its status); a temporary folder is removed however the command ends."""
    import shutil
    import tempfile

    from frtrace.errors import FrtraceError
    from frtrace.exits import at_stop

    try:
        workers, source = _live_workers(options)
    except (FrtraceError, click.BadParameter) as exc:
        _error(exc.format_message() if isinstance(exc, click.BadParameter) else str(exc))
        return EXIT_UNUSABLE
    if options["rounds"] is not None and options["watch"] is None:
        _error("--rounds goes with --watch SECONDS")
        return EXIT_UNUSABLE
    save: Path | None = options["save"]
    if save is not None:
        if save.exists() and (not save.is_dir() or any(save.iterdir())):
            _error(f"--save {save}: not a new or empty folder (what was fetched goes there)")
            return EXIT_UNUSABLE
        base = save
        base.mkdir(parents=True, exist_ok=True)
    else:
        base = Path(tempfile.mkdtemp(prefix="frtrace-live-"))
        at_stop(lambda: shutil.rmtree(base, ignore_errors=True))
    try:
        if options["watch"] is None:
            fetched = _live_round(workers, base, options, source)
            if fetched is None:
                return EXIT_UNUSABLE
            _say_saved(save, base)
            return int(report(_analysis_options(options, base, None)))
        return _live_watch(workers, base, options, source, report, save is not None)
    except FrtraceError as exc:  # a round's folder held no usable dump, say
        _error(str(exc))
        return EXIT_UNUSABLE
    finally:
        if save is None:
            shutil.rmtree(base, ignore_errors=True)


def _live_workers(options: dict[str, Any]) -> tuple[dict[int, Any], str]:
    """The ranks to ask and their worker servers, from --worker or the store; lines on
    stderr for store entries that are not addresses."""
    import os

    from frtrace.errors import FrtraceError
    from frtrace.live.http import parse_worker
    from frtrace.live.store import read_store
    from frtrace.report.live_report import store_lines

    if options["workers"]:
        if options["store"]:
            raise FrtraceError("give --store or --worker, not both")
        workers: dict[int, Any] = {}
        for n, value in enumerate(options["workers"]):
            rank_text, sep, url = value.partition("=")
            if not sep:
                rank, url = n, value
            elif rank_text.isascii() and rank_text.isdigit() and len(rank_text) <= 7:
                rank = int(rank_text)
            else:
                raise click.BadParameter(f"'{value}': RANK=URL wants a rank", param_hint="--worker")
            if rank in workers:
                raise click.BadParameter(f"two addresses for rank {rank}", param_hint="--worker")
            try:
                workers[rank] = parse_worker(url)
            except ValueError as exc:
                raise click.BadParameter(f"'{value}': {exc}", param_hint="--worker") from exc
        return workers, "--worker addresses"
    where = options["store"]
    if not where:
        addr, port = os.environ.get("MASTER_ADDR"), os.environ.get("MASTER_PORT")
        if not addr or not port:
            raise FrtraceError(
                "no job to ask: give --store HOST:PORT (the job's MASTER_ADDR:MASTER_PORT), "
                "set MASTER_ADDR and MASTER_PORT, or give each rank's --worker URL"
            )
        where = f"{addr}:{port}"
    host, sep, port_text = where.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port_text.isdigit() or not 0 < int(port_text[:6]) < 65536:
        raise click.BadParameter(f"'{where}' is not HOST:PORT", param_hint="--store")
    found = read_store(host, int(port_text), min(options["timeout"], 30.0))
    for line in store_lines(found.bad):
        click.echo(line, err=True)
    return found.workers, f"the store at {where}"


def _live_round(workers: dict[int, Any], folder: Path, options: dict[str, Any], source: str) -> Any:
    """One fetch into `folder`, said on stderr; None (and the error said) when no rank
    gave its recorder."""
    from frtrace.live.fetch import fetch_all
    from frtrace.report.live_report import rank_lines, summary

    fetched = fetch_all(workers, folder, options["timeout"])
    for line in rank_lines(fetched):
        click.echo(line, err=True)
    click.echo(summary(fetched, source), err=True)
    if not fetched.answered:
        _error("no rank gave its Flight Recorder: nothing to analyze")
        return None
    return fetched


def _live_watch(
    workers: dict[int, Any],
    base: Path,
    options: dict[str, Any],
    source: str,
    report: Any,
    keep: bool,
) -> int:
    """Rounds every --watch seconds until settled (or --rounds), then the report of the
    last round with what moved since the one before."""
    import shutil
    import time

    from frtrace.live.watch import Round, analyze_round, settled
    from frtrace.report.live_report import round_line, settled_line

    started = time.monotonic()
    previous: Round | None = None
    number = 0
    while True:
        asked = time.monotonic()
        number += 1
        folder = base / f"round-{number}"
        if _live_round(workers, folder, options, source) is None:
            return EXIT_UNUSABLE
        older = previous.trace if previous is not None else None
        trace, analysis = analyze_round(folder, options["world_size"], older)
        click.echo(round_line(number, asked - started, analysis), err=True)
        if previous is not None and settled(previous.analysis, analysis):
            click.echo(settled_line(number), err=True)
            break
        if options["rounds"] is not None and number >= options["rounds"]:
            break
        if previous is not None and not keep:  # only the last two rounds are compared
            shutil.rmtree(previous.folder, ignore_errors=True)
        previous = Round(number, folder, trace, analysis, asked - started)
        time.sleep(max(0.0, options["watch"] - (time.monotonic() - asked)))
    if keep:
        _say_saved(base, base)
    since = previous.folder if previous is not None else None
    return int(report(_analysis_options(options, folder, since)))


def _say_saved(save: Path | None, folder: Path) -> None:
    if save is not None:
        from frtrace.report.fmt import safe

        click.echo(f"frtrace live: kept what was fetched in {safe(str(folder))}", err=True)


def _analysis_options(options: dict[str, Any], folder: Path, since: Path | None) -> dict[str, Any]:
    """The options of `frtrace FOLDER [--since SINCE]` with live's report options."""
    from frtrace.live.fetch import PREFIX

    return {
        "trace_dir": (str(folder),),
        "prefix": PREFIX,
        "raw": False,
        "selected_ranks": (),
        "pg_filters": (),
        "fmt": options["fmt"],
        "stacks": options["stacks"],
        "output": options["output"],
        "mismatch_cap": 10,
        "allow_incomplete_ranks": False,
        "jobs": None,
        "html_path": options["html_path"],
        "since_dir": None if since is None else str(since),
        "fail_on": (),
        "world_size": options["world_size"],
        "straggler_threshold": 5.0,
        "engine": "local",
        "scheduler": None,
        "raw_output": None,
        "verbose": options["verbose"],
        "debug": options["debug"],
    }


def subcommand(name: str) -> click.Command:
    """The click command of a subcommand name (see SUBCOMMANDS)."""
    commands = {"collect": collect_command, "history": history_command, "live": live_command}
    return commands[name]


def run_subcommand(args: list[str], report: Any = None) -> None:
    """`frtrace collect ...` / `history ...` / `live ...`: args start with the subcommand.
    `report(options)` is the analysis of `frtrace DIR` (frtrace.cli.report_and_exit), which
    `live` runs on the folder it wrote."""
    command = subcommand(args[0])
    if len(args) == 1 and Path(args[0]).is_dir():
        click.echo(f"note: to analyze the folder ./{args[0]}, run: frtrace ./{args[0]}", err=True)
    command.main(args=args[1:], prog_name=f"frtrace {args[0]}", obj=report)


def is_subcommand(args: list[str]) -> bool:
    """Whether the command line starts with a subcommand's name (the first argument only)."""
    return bool(args) and args[0] in SUBCOMMANDS
