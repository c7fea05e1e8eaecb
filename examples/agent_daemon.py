"""The example agent daemon (run by `make demo`).

It needs the provider adapters and the chaos provider server, which have not landed yet.
Until they do, it says so honestly and exits 0.
"""

from __future__ import annotations


def main() -> int:
    print(
        "make demo: the example agent daemon is not built yet "
        "(it needs the provider adapters and the chaos server); nothing was run."
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
