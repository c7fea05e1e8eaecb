"""The chaos server as a command: ``python -m actors.testing.chaos``.

``--host`` (default ``127.0.0.1``), ``--port`` (default 8099; 0 picks a free port) and
``--script`` (a TOML fault script, see :func:`~actors.testing.chaos.script.load_script`).
Prints ``chaos provider listening on <url>`` once it accepts connections, then serves
until interrupted. A script that does not load exits with status 2 and the ``config_invalid``
message (every offending field named) on stderr, without a traceback.
"""

from __future__ import annotations

import argparse

import trio

from actors.errors import ActorError
from actors.testing.chaos.script import FaultScript, load_script
from actors.testing.chaos.server import ChaosServer


def main(argv: list[str] | None = None) -> None:
    """Parse ``argv`` (default: the command line) and serve; see the module docstring."""
    parser = argparse.ArgumentParser(
        prog="python -m actors.testing.chaos",
        description="Run the chaos LLM provider on loopback.",
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8099)
    parser.add_argument("--script", help="a TOML fault script")
    args = parser.parse_args(argv)
    script = FaultScript()
    if args.script:
        with open(args.script, encoding="utf-8") as handle:
            try:
                script = load_script(handle.read())
            except ActorError as err:
                parser.exit(2, f"{err.message}\n")

    async def run() -> None:
        server = ChaosServer(script)
        async with trio.open_nursery() as nursery:
            await nursery.start(
                lambda task_status: server.serve(
                    host=args.host, port=args.port, task_status=task_status
                )
            )
            print(f"chaos provider listening on {server.url}", flush=True)

    trio.run(run)
