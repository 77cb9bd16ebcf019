"""The Python API, for notebooks and scripts: the same calls the `frtrace` command makes.

import frtrace
trace = frtrace.load("/tmp/dumps")            # a folder, or a list of dump files
analysis = frtrace.analyze(trace)
analysis.root_cause                           # a Finding, or None when healthy
print(frtrace.to_text(analysis))              # the report the command prints
report = json.loads(frtrace.to_json(analysis))  # the JSON report (frtrace.report/1)
Path("hang.html").write_text(frtrace.to_html(analysis))
trace = frtrace.load("s3://bucket/job-123/", engine="dask", scheduler="tcp://host:8786")
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from frtrace.analysis.analyze import Analysis
from frtrace.analysis.analyze import analyze as _analyze
from frtrace.dumps.discover import Discovery, discover, discover_many
from frtrace.dumps.store import is_url
from frtrace.loading import load_found, locate
from frtrace.loading.evidence import load_with_evidence
from frtrace.tables.load import load_discovered
from frtrace.tables.parse import ProgressCallback
from frtrace.tables.trace import Trace

PathLike = str | os.PathLike[str]


def load(
    path_or_paths: PathLike | Iterable[PathLike] | None = None,
    *,
    prefix: str | None = None,
    ranks: Iterable[int] | None = None,
    jobs: int | None = None,
    progress: ProgressCallback | None = None,
    engine: str = "local",
    scheduler: str | None = None,
    storage_options: dict[str, Any] | None = None,
    client: Any = None,
) -> Trace:
    """Read one job's dumps into shared tables.

    `path_or_paths` is the folder holding one dump per rank (found as the command finds them,
    `prefix` narrowing the file names), an fsspec URL of one (`s3://bucket/job-123/`,
    `file:///dumps`; `storage_options` go to fsspec), or a list of dump files whose names
    end in their rank (and of folders, logs and py-spy outputs). The job's logs and py-spy
    outputs found beside the dumps are read too (`trace.evidence`); without any dump, a Trace
    without entries carries them, and `analyze` names the culprit from them. None looks
    where PyTorch writes by default. `ranks` reads only those ranks' files.
    `engine="dask"` parses on a Dask cluster: the scheduler at `scheduler`
    (else $DASK_SCHEDULER_ADDRESS, else a local cluster started for the call), or an
    existing dask.distributed `client`. The entries then stay on the cluster but for those
    that did not settle (`trace.table` holds those, `trace.facts` the facts of the
    others); close the Trace (`trace.close()`) to release them and stop a cluster started
    for it. Unusable files are skipped (see `trace.skipped`); FrtraceError when none is
    usable. `progress(files_done, files_total, entries)` hears of the files as they are
    read; if it also has a `stage(what, done, total)` method, it hears the name of each
    step after the reading, and a `notice(what)` method hears instead of `stage` of a wait
    that may last hours (a scheduler with no worker yet). frtrace.report.progress_line.ProgressLine
    is the terminal's line.
    """
    if engine != "local" or (isinstance(path_or_paths, str) and is_url(path_or_paths)):
        if path_or_paths is not None and not isinstance(path_or_paths, (str, os.PathLike)):
            found: Any = _from_files([Path(p) for p in path_or_paths])
        else:
            found = locate(path_or_paths, prefix, storage_options)
        return load_found(
            found,
            engine=engine,
            scheduler=scheduler,
            ranks=ranks,
            jobs=jobs,
            progress=progress,
            client=client,
        )
    if path_or_paths is None or isinstance(path_or_paths, (str, os.PathLike)):
        folder = None if path_or_paths is None else Path(path_or_paths)
        if folder is not None and folder.is_file():
            found = _from_files([folder])
        else:
            found = discover(folder, prefix)
    else:
        found = _from_files([Path(p) for p in path_or_paths])
    return load_with_evidence(
        found, lambda: load_discovered(found, ranks=ranks, jobs=jobs, progress=progress)
    )


def _from_files(paths: list[Path]) -> Discovery:
    """Files (and folders) given one by one: dumps, whose names end in their rank, and the
    job's logs and py-spy outputs, told apart by content."""
    return discover_many(paths, None)


def analyze(
    trace: Trace,
    *,
    mismatch_cap: int = 10,
    straggler_threshold: float = 5.0,
    world_size: int | None = None,
) -> Analysis:
    """Every finding about the job, the root cause first (`mismatch_cap`: at most N findings
    per group and kind), and the stragglers: ranks whose lateness cost `straggler_threshold`
    percent or more of the time their calls cover (docs/stragglers.md).
    `world_size`: the job's rank count where no dump states it (gloo with sub-groups);
    without it such a job with no finding is `undetermined`, never ok.
    `analysis.since(load(older_dir))` adds which ranks advanced since an older snapshot."""
    if world_size is not None:
        trace = trace.with_world(world_size)
    return _analyze(trace, mismatch_cap=mismatch_cap, straggler_threshold=straggler_threshold)


# --- reports: each renders the one view of the analysis (frtrace.report.view). Imported on
# first use: loading and analyzing never need them.


def to_text(analysis: Analysis, *, width: int | None = None, verbose: bool = False) -> str:
    """The text report the command prints (`width`: the terminal's, else 80; `verbose`: as
    `-v`, every finding and group)."""
    from frtrace.report.text import render_text
    from frtrace.report.view import build_view

    return render_text(build_view(analysis), width=width, verbose=verbose)


def to_json(analysis: Analysis) -> str:
    """The JSON report (schema frtrace.report/1) as text; `json.loads` it for a dict."""
    from frtrace.report.json_report import render_json
    from frtrace.report.view import build_view

    return render_json(build_view(analysis))


def to_html(analysis: Analysis) -> str:
    """The self-contained HTML page that `--html FILE` writes."""
    from frtrace.report.html import render_html
    from frtrace.report.view import build_view

    return render_html(build_view(analysis))
