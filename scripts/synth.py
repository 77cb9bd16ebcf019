#!/usr/bin/env python3
"""Write synthetic dumps: `python -m frtrace.synth` (frtrace/synth/cli.py) from a fresh clone."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # without installing frtrace
from frtrace.synth.cli import main

if __name__ == "__main__":
    sys.exit(main())
