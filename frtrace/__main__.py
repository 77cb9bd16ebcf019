"""`python -m frtrace` runs the same CLI as the `frtrace` command."""

from frtrace.entry import main

if __name__ == "__main__":
    main()
