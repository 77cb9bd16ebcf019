"""The optional C fast path; everything else is configured in pyproject.toml.

`optional=True`: without a compiler the build still succeeds and frtrace parses with Python's
unpickler only (frtrace/tables/columns.py falls back when the import fails).
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "frtrace.tables._fastdump",
            ["frtrace/tables/_fastdump.c"],
            extra_compile_args=["-std=c99", "-O2"],
            optional=True,
        )
    ]
)
