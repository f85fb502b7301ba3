"""``python -m ccdiag``: the same command line as ``ccdiag``."""

from ccdiag.cli import main

if __name__ == "__main__":
    main()
