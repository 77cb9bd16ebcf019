"""`python -m frtrace` runs the same CLI as the `frtrace` command."""

from frtrace.cli import main

if __name__ == "__main__":
    main()
