"""`python -m frtrace.synth OUT ...`: the generator's command (frtrace.synth.cli)."""

import sys

from frtrace.synth.cli import main

if __name__ == "__main__":
    sys.exit(main())
