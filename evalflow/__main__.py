"""``python -m evalflow``: the command line is :mod:`evalflow.commands.main` (see there why it is not here)."""

from evalflow.commands.main import entry

if __name__ == "__main__":
    entry()
