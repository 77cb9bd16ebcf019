"""frtrace's version, in a module of its own: the modules that state it (the Dask engine's
version handshake, `collect.json`, `--version`) import it from here, not from the package
root, whose lazy API names sit above every layer (docs/architecture.md)."""

__version__ = "0.1.0"
