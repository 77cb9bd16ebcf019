"""Finding dump files on disk and reading them safely into plain Python data."""
