"""The `frtrace` command: a thin click layer over load -> analyze -> report.

Results go to stdout; progress, skipped files and warnings go to stderr. Errors the user can
fix are one line on stderr and exit status 2, internal errors one line and status 3, never a
traceback (unless --debug). Text from dumps and file names is escaped before it is printed.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import click

# Only click and these small modules at import: every other import is made inside the command,
# so that `frtrace --help` starts in tens of milliseconds and the parse workers fork before
# numpy's analysis and the reports are loaded (docs/architecture.md, "Lazy imports").
from frtrace.errors import FrtraceError, first_line
from frtrace.exits import (
    EXIT_FINDINGS,
    EXIT_INTERNAL,
    EXIT_OK,
    EXIT_UNKNOWN,
    EXIT_UNUSABLE,
    exit_now,
    quiet_broken_pipe,
    stop_on_signals,
)
from frtrace.version import __version__

if TYPE_CHECKING:
    from frtrace.report.progress_line import ProgressLine


EPILOG = """\b
Examples:
  frtrace /tmp/ --prefix trace_          analyze the dumps /tmp/trace_0, /tmp/trace_1, ...
  frtrace                                analyze where PyTorch writes by default
                                         ($TORCH_FR_DUMP_TEMP_FILE, else torch's default,
                                         ~/.cache/torch/comm_lib_trace_rank_<rank>)
  frtrace dumps/ --format json -o r.json the report as JSON, also saved to r.json
  frtrace -j --selected-ranks 0 1        raw entries of ranks 0 and 1, as JSON
  frtrace dumps/ -j --format table --pg-filters default_pg
                                         raw entries side by side, one column per rank
  frtrace dumps/ --html hang.html        also write a self-contained page to attach
  frtrace dumps_t2/ --since dumps_t1/    which ranks issued nothing new between two dumps
  frtrace s3://bucket/job-1/ --engine dask --scheduler tcp://host:8786
                                         parse on a Dask cluster's workers, read from S3

\b
Subcommands (the first argument; a folder named like one is analyzed as ./collect):
  frtrace collect OUT/%h                 on each node of a hung job: py-spy stacks labeled
                                         with their ranks, the dumps, collect.json
  srun --overlap --jobid=$JOB --nodes=$N --ntasks-per-node=1 frtrace collect /shared/inc-42/%h
  pdsh -w node[01-16] frtrace collect /shared/inc-42/%h
  frtrace history reports/               which hosts and ranks were the culprit, how often
  frtrace live                           a running job, over PyTorch's debug server
  frtrace collect --help, frtrace history --help, frtrace live --help

\b
Exit status:
  0  the dumps look healthy, and show the whole job
  1  findings: a desync, mismatch or hang was found (fails a CI step); with --since
     a rank that stopped; with --fail-on stragglers, a straggler
  2  usage error, or no usable dump
  3  internal error (rerun with --debug for a traceback)
  4  UNKNOWN: no finding, but the dumps do not show the whole job (ranks without a
     dump, unreadable ones, a world size no dump states: try --world-size N)
  141 stdout closed early (e.g. piped into head); 130 interrupted; 143 terminated
"""

_INT_LIST = re.compile(r"^[0-9]+(-[0-9]+)?(,[0-9]+(-[0-9]+)?)*,?$")
# -j --format table puts each rank in a column of 30 to 50 characters: past 16 no screen shows
# a row (1,024 ranks made 50,000-character lines, 214 MB in 46 s). Refused rather than paged:
# a pager does not make a row narrower. JSON has no such bound.
TABLE_MAX_RANKS = 16
_MULTI_VALUE = {"--selected-ranks": "ranks", "--pg-filters": "names"}


def expand_multi_values(args: Sequence[str]) -> list[str]:
    """Let `--selected-ranks 0 1 2` and `--pg-filters tp dp` take several values.

    click options take a fixed number of values, so each further value is rewritten as a
    repeated option. Rank values must look like ranks (0, 3-5, 1,2); filter values stop at
    the next option or at something that looks like a path (the trace folder).
    """
    out: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            out.extend(args[i:])
            break
        out.append(arg)
        i += 1
        mode = _MULTI_VALUE.get(arg)
        if mode is None or i >= len(args):
            continue
        out.append(args[i])  # the first value is taken as is; click validates it
        i += 1
        while i < len(args) and _is_more_value(mode, args[i]):
            out.extend([arg, args[i]])
            i += 1
    return out


def _is_more_value(mode: str, token: str) -> bool:
    if token.startswith("-"):
        return False
    if mode == "ranks":
        return bool(_INT_LIST.match(token))
    return "/" not in token and not Path(token).exists()


def parse_ranks(values: Sequence[str]) -> list[int] | None:
    """'0', '3-5', '1,2' -> sorted ranks; None when no selection was given."""
    if not values:
        return None
    from frtrace.dumps.limits import budgets

    max_rank = budgets().max_rank
    ranks: set[int] = set()
    for value in values:
        for part in filter(None, value.split(",")):
            if not _INT_LIST.match(part):
                raise click.BadParameter(
                    f"'{part}' is not a rank or a range like 0-7", param_hint="--selected-ranks"
                )
            lo_text, _, hi_text = part.partition("-")
            lo, hi = int(lo_text[:20]), int((hi_text or lo_text)[:20])
            if hi < lo:
                raise click.BadParameter(
                    f"'{part}' is a reversed range (write {hi}-{lo})", param_hint="--selected-ranks"
                )
            if hi > max_rank:
                raise click.BadParameter(
                    f"rank {hi} is above the largest rank frtrace accepts ({max_rank:,})",
                    param_hint="--selected-ranks",
                )
            ranks.update(range(lo, hi + 1))
    return sorted(ranks)


def _fail(message: str, code: int = EXIT_UNUSABLE) -> NoReturn:
    from frtrace.report.fmt import safe

    click.echo(f"frtrace: error: {safe(message)}", err=True)
    sys.exit(code)


@click.command(
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
    epilog=EPILOG,
)
@click.argument("trace_dir", nargs=-1, type=click.Path(path_type=str))
@click.option(
    "-p", "--prefix", help="Only files whose name starts with PREFIX (default: inferred)."
)
@click.option(
    "-j",
    "--just-print-entries",
    "raw",
    is_flag=True,
    help="Raw mode: print the normalized entries instead of analyzing.",
)
@click.option(
    "--selected-ranks",
    multiple=True,
    metavar="RANK...",
    help="Only these ranks (e.g. 0 1, 0-7, 3,5).",
)
@click.option(
    "--pg-filters",
    multiple=True,
    metavar="NAME_OR_DESC...",
    help="Only groups whose name or desc matches (e.g. 0, mesh_tp).",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["table", "json"]),
    default=None,
    help=f"Output format [default: table; json with -j, where a table shows {TABLE_MAX_RANKS} "
    "ranks at most].",
)
@click.option(
    "--print-stack-trace",
    "stacks",
    is_flag=True,
    help="Show whole stacks (with -j --format json: a frames list per entry).",
)
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Also write the JSON report to this file.",
)
@click.option(
    "--mismatch-cap",
    type=click.IntRange(min=1),
    default=10,
    show_default=True,
    help="At most N findings per group and kind.",
)
@click.option(
    "--allow-incomplete-ranks",
    is_flag=True,
    help="Accepted for torchfrtrace compatibility: partial analysis is the default.",
)
@click.option(
    "--jobs",
    type=click.IntRange(min=1),
    default=None,
    metavar="N",
    help="Worker processes for parsing [default: all cores for large jobs].",
)
@click.option(
    "--html",
    "html_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Also write the report as one self-contained HTML page to this file.",
)
@click.option(
    "--since",
    "since_dir",
    type=click.Path(file_okay=False, path_type=str),
    help="An older snapshot of the same job: name the ranks that did not advance since.",
)
@click.option(
    "--fail-on",
    type=click.Choice(["stragglers"]),
    multiple=True,
    help="Also exit 1 on these (informational otherwise): stragglers over the threshold.",
)
@click.option(
    "--world-size",
    type=click.IntRange(min=1),
    default=None,
    metavar="N",
    help="The job's rank count, where no dump states it (gloo jobs with sub-groups); "
    "without it such a job is never called healthy (exit 4).",
)
@click.option(
    "--straggler-threshold",
    type=click.FloatRange(min=0, max=100),
    default=5.0,
    show_default=True,
    metavar="PCT",
    help="Share (%) of the time its calls cover that a rank's lateness must cost the others "
    "for it to be reported as a straggler (docs/stragglers.md).",
)
@click.option(
    "--engine",
    type=click.Choice(["local", "dask"]),
    default="local",
    show_default=True,
    help="Where files are parsed: processes of this machine, or a Dask cluster's workers.",
)
@click.option(
    "--scheduler",
    metavar="ADDRESS",
    default=None,
    help="Dask scheduler: its address (e.g. tcp://host:8786) or the file it wrote "
    "(--scheduler-file) [default: $DASK_SCHEDULER_ADDRESS, else a local cluster].",
)
@click.option(
    "--raw-output",
    default=None,
    metavar="DIR",
    help="With -j --engine dask: write the entries as Parquet files into DIR.",
)
@click.option("-v", "--verbose", is_flag=True, help="Say what was inferred and repaired.")
@click.option("--debug", is_flag=True, help="Show Python tracebacks of internal errors.")
@click.version_option(__version__, "--version", prog_name="frtrace")
def cli(**options: Any) -> None:
    """Find the rank that broke a hung PyTorch job, from its Flight Recorder dumps.

    TRACE_DIR holds one dump per rank (pickle or JSON, optionally gzip-compressed; one level
    of sub-folders is searched too). The rank is the trailing number of each file name. The
    job's logs and py-spy outputs beside the dumps are read too, told apart by content; with
    no dump, the logs alone name the culprit. Several folders and files may be given.
    """

    report_and_exit(options)


def report_and_exit(options: dict[str, Any]) -> NoReturn:
    """Load, analyze and report as `options` say, and exit with the status: FrtraceError and
    bad option values are one line and status 2, anything else one line and status 3 (the
    traceback with --debug). `frtrace live` ends with this on the folder it wrote."""
    debug = options["debug"]
    for stream in (sys.stdout, sys.stderr):  # a name no locale can encode is still printed
        with contextlib.suppress(AttributeError, ValueError, OSError):
            stream.reconfigure(errors="backslashreplace")  # type: ignore[union-attr]
    try:
        code = run(options)
        sys.stdout.flush()
    except FrtraceError as exc:
        from frtrace.report.skipped import skipped_lines

        for line in skipped_lines(getattr(exc, "skipped", []), options["verbose"]):
            click.echo(line, err=True)
        if debug:
            raise
        _fail(_explain(exc))
    except click.BadParameter as exc:
        _fail(exc.format_message())
    except BrokenPipeError:
        quiet_broken_pipe()
    except KeyboardInterrupt:
        sys.exit(130)
    except Exception as exc:  # never a traceback for the user
        if debug:
            raise
        detail = first_line(exc)
        _fail(
            f"internal error: {type(exc).__name__}: {detail} (rerun with --debug for a traceback)",
            EXIT_INTERNAL,
        )
    sys.exit(code)


def _quiet_dask() -> None:
    """Dask's own log lines off: the command says in one line what went wrong with the
    cluster, and Dask's would bury it (a lost scheduler's reconnection logged 36 lines with
    a traceback, a local cluster that could not start one per worker). A filter on Dask's
    handler, as its loggers have levels of their own and a local cluster sets the handler's
    level. --debug keeps them."""
    import logging

    try:
        import distributed  # noqa: F401  (its import sets up its handler)
    except ImportError:  # connect says what to install
        return
    for handler in logging.getLogger("distributed").handlers:
        if _dropped not in handler.filters:  # the command may run more than once in a process
            handler.addFilter(_dropped)


def _dropped(_record: object) -> bool:
    return False


def _explain(exc: FrtraceError) -> str:
    """The one line for an error the user can fix; mixed jobs get the evidence worded."""
    # Only an analysis raises MixedJobsError: a mistyped folder must not wait for pandas.
    consistency = sys.modules.get("frtrace.analysis.consistency")
    if consistency is not None and isinstance(exc, consistency.MixedJobsError):
        from frtrace.report.wording import mixed_jobs

        return mixed_jobs(exc.conflicts, exc.split)
    return str(exc)


def _without_arrow() -> None:
    """Keep pandas from importing pyarrow in a local run, which never uses it.

    When pyarrow is installed (the dask extra brings it), pandas imports it at start-up only
    to learn its version: about 0.3 s on every run, and string columns that differ from an
    install without it. Only the Dask engine's Parquet output needs pyarrow.
    """
    if "pandas" not in sys.modules:
        sys.modules.setdefault("pyarrow", None)  # type: ignore[arg-type]


def run(options: dict[str, Any]) -> int:
    """Load, then print raw entries or the report; returns the exit status."""
    if options["engine"] != "dask":
        _without_arrow()
    from frtrace.dumps.discover import Discovery
    from frtrace.loading import load_found, locate
    from frtrace.report.fmt import safe
    from frtrace.report.progress_line import ProgressLine

    ranks = parse_ranks(options["selected_ranks"])
    pg_filters = list(options["pg_filters"])
    engine, scheduler = options["engine"], options["scheduler"]
    if scheduler and engine != "dask":
        raise FrtraceError("--scheduler goes with --engine dask")
    raw_parquet = options["raw"] and engine == "dask"
    if options["raw_output"] is not None and not raw_parquet:
        raise FrtraceError("--raw-output goes with -j --engine dask (Parquet entries)")
    if raw_parquet and options["raw_output"] is None:
        raise FrtraceError("-j --engine dask writes Parquet: give the folder with --raw-output DIR")
    found = locate(options["trace_dir"], options["prefix"])
    if options["output"] is not None and isinstance(found, Discovery):
        check_output(options["output"], found)
    if found.prefix_inferred and (found.files or found.prefix):  # '': no rank-numbered name
        click.echo(
            f"frtrace: using prefix '{safe(found.prefix)}' (inferred; set it with --prefix)",
            err=True,
        )
    if options["raw"] and ranks is not None:  # before reading: only those ranks' files are read
        _warn_absent(ranks, found_ranks(found), "among the dumps")
    if engine == "local" and not (options["raw"] and ranks):  # raw: only those ranks' files
        from frtrace.loading.memory import local_shortfall
        from frtrace.report.wording import memory_warning

        short = local_shortfall(found)
        if short is not None:
            click.echo(f"warning: {memory_warning(short)}", err=True)
    started = time.monotonic()
    progress = ProgressLine()
    with contextlib.ExitStack() as stack:
        client = None
        if engine == "dask":  # one cluster for the run: the --since snapshot's too
            from frtrace.cluster.dask import connect

            if not options["debug"]:
                _quiet_dask()
            client = stack.enter_context(connect(scheduler, options["jobs"], progress))
        if raw_parquet:
            return _raw_parquet(found, options, ranks, pg_filters, client, progress)
        try:
            trace = load_found(
                found,
                engine=engine,
                ranks=ranks if options["raw"] else None,
                jobs=options["jobs"],
                progress=progress,
                client=client,
            )
        finally:
            progress.close()
        with contextlib.closing(trace):  # a Dask job keeps its entries on the cluster till then
            return _answer(trace, options, ranks, pg_filters, started, client, progress)


def _answer(
    trace: Any,
    options: dict[str, Any],
    ranks: list[int] | None,
    pg_filters: list[str],
    started: float,
    client: Any,
    progress: ProgressLine,
) -> int:
    """Print the loaded trace's entries or report; returns the exit status."""
    from frtrace.report.fmt import MarkedStyle, safe, use_color
    from frtrace.report.skipped import skipped_lines
    from frtrace.tables.select import matching_groups

    engine = options["engine"]
    for line in skipped_lines(trace.skipped, options["verbose"]):
        click.echo(line, err=True)
    for warning in trace.warnings:
        click.echo(f"warning: {safe(warning)}", err=True)
    loaded = time.monotonic()
    if options["verbose"]:
        click.echo(
            f"note: loaded {len(trace.file_table)} dump(s), {trace.entry_count:,} entries in "
            f"{loaded - started:.2f}s",
            err=True,
        )
        for note in trace.notes + (trace.evidence.notes if trace.evidence else []):
            click.echo(f"note: {safe(note)}", err=True)
    names = matching_groups(trace.group_table, pg_filters)
    style = MarkedStyle(use_color())
    if options["raw"]:
        from frtrace.report.raw import entries_table, write_entries_json

        entries = select_entries(trace.entries, ranks, names)
        if (options["fmt"] or "json") == "json":
            write_entries_json(trace, entries, sys.stdout, with_frames=options["stacks"])
        else:
            check_table_width(entries["rank"].nunique())
            click.echo(safe(entries_table(entries), keep_newlines=True))
        return EXIT_OK
    if ranks is not None:
        job = job_ranks(trace, options["world_size"])
        _warn_absent(ranks, job, "among the dumps" if job == set(trace.ranks) else "in the job")
    from frtrace.api import analyze
    from frtrace.report.json_report import render_json
    from frtrace.report.text import render_text
    from frtrace.report.view import build_view

    try:
        progress.stage(f"analyzing {trace.entry_count:,} entries")
        analysis = analyze(
            trace,
            mismatch_cap=options["mismatch_cap"],
            straggler_threshold=options["straggler_threshold"],
            world_size=options["world_size"],
        )
        if options["since_dir"] is not None:
            from frtrace.api import load

            progress.label = "reading the --since snapshot"
            older = load(
                options["since_dir"],
                prefix=options["prefix"],
                jobs=options["jobs"],
                engine=engine,
                client=client,
                progress=progress,
            )
            older.close()  # what --since reads of it is in its facts
            analysis.since(older)
    finally:
        progress.close()
    if options["verbose"]:
        click.echo(f"note: analyzed in {time.monotonic() - loaded:.2f}s", err=True)
    if ranks is not None or names is not None:
        analysis = analysis.narrowed(ranks, names)
    view = build_view(analysis)  # the one view every report renders
    as_json = (options["fmt"] or "table") == "json"
    report = render_json(view) if as_json or options["output"] is not None else ""
    if options["output"] is not None:
        try:
            options["output"].write_text(report)
        except OSError as exc:
            raise FrtraceError(f"cannot write {options['output']}: {exc.strerror}") from exc
    if as_json:
        sys.stdout.write(report)
    code = EXIT_OK if analysis.ok and not analysis.stopped else EXIT_FINDINGS
    if analysis.undetermined and not analysis.stopped:
        code = EXIT_UNKNOWN
    if "stragglers" in options["fail_on"] and analysis.stragglers and analysis.stragglers.top:
        code = EXIT_FINDINGS
    if options["html_path"] is not None:
        _write_html(view, options["html_path"], code)
    if not as_json:
        text = render_text(
            view,
            style,
            full_stacks=options["stacks"],
            verbose=options["verbose"],
            exit_status=code,
        )
        sys.stdout.write(style.finish(text))
    return code


def _raw_parquet(
    found: Any,
    options: dict[str, Any],
    ranks: Any,
    pg_filters: list[str],
    client: Any,
    progress: ProgressLine,
) -> int:
    """-j --engine dask: the workers parse and write Parquet; no entry comes to this process."""
    from frtrace.loading import make_plan
    from frtrace.report.fmt import safe
    from frtrace.report.parquet import write_raw
    from frtrace.report.skipped import skipped_lines

    work = make_plan(found, ranks)
    out = str(options["raw_output"])
    try:
        result = write_raw(
            client,
            work.items,
            work.remote,
            work.storage_options,
            work.trace_dir,
            work.skipped,
            pg_filters,
            options["stacks"],
            out,
            progress,
        )
    finally:
        progress.close()
    for line in skipped_lines(result.skipped, options["verbose"]):
        click.echo(line, err=True)
    for warning in result.warnings:
        click.echo(f"warning: {safe(warning)}", err=True)
    if options["verbose"]:
        for note in result.notes:
            click.echo(f"note: {safe(note)}", err=True)
    click.echo(
        f"frtrace: wrote {result.entries:,} entries to {safe(out)} "
        f"({len(result.files)} Parquet file(s), written by the workers)",
        err=True,
    )
    return EXIT_OK


def _write_html(view: Any, path: Path, code: int) -> None:
    """--html FILE: the page goes to the file, a line on stderr says where."""
    from frtrace.report.fmt import safe
    from frtrace.report.html import write_html

    try:
        write_html(view, path, exit_status=code)
    except OSError as exc:
        raise FrtraceError(f"cannot write {path}: {exc.strerror}") from exc
    click.echo(f"frtrace: wrote {safe(str(path))}", err=True)


def check_output(output: Path, found: Any) -> None:
    """-o must not overwrite an input dump (or anything named like one in the dump folder)."""
    from frtrace.dumps.discover import rank_from_name

    if output.is_dir():
        raise FrtraceError(f"-o {output}: is a folder; give a file name for the JSON report")
    inputs = [f.path for f in found.files] + [path for path, _reason in found.skipped]
    for path in inputs:
        with contextlib.suppress(OSError):
            if output.exists() and os.path.samefile(output, path):
                raise FrtraceError(f"-o {output}: that is an input dump; refusing to overwrite it")
    with contextlib.suppress(OSError):
        same_dir = os.path.samefile(output.parent, found.trace_dir)
        named_like_dump = output.name.startswith(found.prefix) and (
            rank_from_name(output.name) is not None
        )
        if same_dir and named_like_dump:
            raise FrtraceError(
                f"-o {output}: named like a dump in the dump folder; choose another name"
            )


def found_ranks(found: Any) -> list[int]:
    """The ranks of the dump files discovery found (a folder's or a store's)."""
    from frtrace.dumps.discover import Discovery

    if isinstance(found, Discovery):
        return [f.rank for f in found.files]
    return [rank for _url, rank in found.files]


def job_ranks(trace: Any, world_size: int | None) -> set[int]:
    """Every rank the job is known to have: those with a dump, an unreadable one or none at
    all (the world a dump or --world-size states, the members of its groups)."""
    known = set(trace.ranks) | set(trace.missing_dumps) | set(trace.unreadable)
    return known | set(range(world_size or 0))


def _warn_absent(ranks: list[int], present: Any, where: str) -> None:
    """--selected-ranks naming ranks that are not there: a warning for some, exit 2 for all
    (a selection that matches nothing would print nothing, or a report of other ranks)."""
    from frtrace.ranks import check_selection

    present = set(present)
    if not present:  # no rank known (logs without dumps): nothing to hold the selection to
        return
    line = check_selection(ranks, present, where)
    if line:
        click.echo(f"warning: {line}", err=True)


def check_table_width(ranks: int, limit: int = TABLE_MAX_RANKS) -> None:
    """-j --format table: refuse more rank columns than a screen can show, saying how to get
    them: a table that wide is unreadable, and takes a minute and hundreds of MB at 1,024."""
    if ranks > limit:
        raise FrtraceError(
            f"-j --format table shows each rank as a column: {ranks:,} ranks do not fit (at most "
            f"{limit}); narrow them with --selected-ranks (e.g. 0-{limit - 1}) or --pg-filters, "
            "or print every rank with --format json"
        )


def select_entries(entries: Any, ranks: list[int] | None, names: set[str] | None) -> Any:
    """Narrow entries to the selected ranks and groups."""
    mask = None
    if ranks is not None:
        mask = entries["rank"].isin(ranks)
    if names is not None:
        pg_mask = entries["pg_name"].isin(names)
        mask = pg_mask if mask is None else mask & pg_mask
    return entries if mask is None else entries.loc[mask]


def main(argv: Sequence[str] | None = None) -> None:
    """Console-script entry point."""
    args = list(sys.argv[1:] if argv is None else argv)
    # frtrace does no linear algebra: without this, numpy's OpenBLAS starts a thread per core
    # at import that spins for a while, ~0.1 CPU-second of a 2-core machine on every run.
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    # numpy asks for transparent huge pages for every array of 4 MB or more; each first touch
    # then zeroes 2 MB. With the merge's and the analysis' short-lived column temporaries the
    # parent spent 0.7-0.9 s in the kernel at 1,024 ranks; 0.33-0.40 s with 4 KB pages.
    os.environ.setdefault("NUMPY_MADVISE_HUGEPAGE", "0")
    stop_on_signals()
    from frtrace.subcommands import is_subcommand, run_subcommand

    try:
        if is_subcommand(args):
            run_subcommand(args, report_and_exit)
        else:
            cli.main(args=expand_multi_values(args), prog_name="frtrace")
    except SystemExit as done:
        if "distributed" in sys.modules:  # Dask closes its clients and clusters at exit
            raise
        exit_now(done.code)
