"""The Dask engine: dumps parsed where they lie, on a cluster's workers (dask.py); the
collectives that can name no culprit settled and left there (settle.py, spread.py), the
client given the rest and the facts of all (frtrace.analysis.facts' assembled provider); raw
mode's per-file summaries and job-wide tables (assemble.py)."""
