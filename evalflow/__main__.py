"""``python -m evalflow``: the command line is :mod:`evalflow.cli` (see there why it is not here)."""

from evalflow.cli import entry

if __name__ == "__main__":
    entry()
