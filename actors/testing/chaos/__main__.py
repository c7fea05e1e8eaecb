"""``python -m actors.testing.chaos``: see :mod:`actors.testing.chaos.cli`."""

from actors.testing.chaos.cli import main

if __name__ == "__main__":
    main()
