"""frtrace: find the rank that broke a hung PyTorch job, from its Flight Recorder dumps.

Importing this package never imports torch, nor pandas: `frtrace.load`, `frtrace.analyze`,
the reports `frtrace.to_text`, `frtrace.to_json` and `frtrace.to_html`, `frtrace.Trace` and
`frtrace.Analysis` are imported on first use, so `frtrace --help` starts fast. See
frtrace/api.py.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from frtrace.version import __version__

__all__ = [
    "Analysis",
    "FrtraceError",
    "Trace",
    "__version__",
    "analyze",
    "load",
    "to_html",
    "to_json",
    "to_text",
]

if TYPE_CHECKING:
    from frtrace.analysis.analyze import Analysis
    from frtrace.api import analyze, load, to_html, to_json, to_text
    from frtrace.errors import FrtraceError
    from frtrace.tables.trace import Trace

_LAZY = {
    "load": "frtrace.api",
    "analyze": "frtrace.api",
    "to_text": "frtrace.api",
    "to_json": "frtrace.api",
    "to_html": "frtrace.api",
    "Analysis": "frtrace.analysis.analyze",
    "Trace": "frtrace.tables.trace",
    "FrtraceError": "frtrace.errors",
}


def __getattr__(name: str) -> Any:
    """The API on first use (PEP 562), keeping `import frtrace` cheap."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'frtrace' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
