"""`python -m bench [NAME]`: run the benchmarks (none exist yet)."""

from __future__ import annotations

import sys


def main(argv: list[str]) -> int:
    print("make bench: no benchmarks exist yet; the actor runtime adds the first ones.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
