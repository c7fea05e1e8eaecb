"""``python -m actors``: the command line (``runs``: look inside a run journal)."""

import sys

from actors.journal.cli import main

if __name__ == "__main__":
    sys.exit(main())
