"""`frtrace collect` and `frtrace history`: subcommands beside the analysis.

`frtrace` with a first argument `collect` or `history` runs these (frtrace.cli.main picks
them before the analysis' options are parsed); anything else is the analysis, so a folder
literally named `collect` is analyzed as `frtrace ./collect` (or `frtrace -- collect`).
Neither subcommand imports numpy or pandas. Results go to stdout, progress and warnings to
stderr.
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

SUBCOMMANDS = ("collect", "history")
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


def subcommand(name: str) -> click.Command:
    """The click command of a subcommand name (see SUBCOMMANDS)."""
    return collect_command if name == "collect" else history_command


def run_subcommand(args: list[str]) -> None:
    """`frtrace collect ...` / `frtrace history ...`: args start with the subcommand."""
    command = subcommand(args[0])
    if len(args) == 1 and Path(args[0]).is_dir():
        click.echo(f"note: to analyze the folder ./{args[0]}, run: frtrace ./{args[0]}", err=True)
    command.main(args=args[1:], prog_name=f"frtrace {args[0]}")


def is_subcommand(args: list[str]) -> bool:
    """Whether the command line starts with a subcommand's name (the first argument only)."""
    return bool(args) and args[0] in SUBCOMMANDS
