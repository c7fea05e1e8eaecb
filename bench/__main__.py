"""`python -m bench [NAME ...]`: run benchmarks, print a table, write bench/out/latest.json.

Every row is a ratio against a baseline measured in the same run, so numbers compare
across machines. Rows: ``{name, value, unit, baseline, ratio, target}``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from bench import (
    actor_bench,
    fleet_bench,
    journal_bench,
    pool_bench,
    provider_bench,
    resilience_bench,
    run_bench,
    supervisor_bench,
    tool_bench,
)
from bench.common import Row

BENCHMARKS = {
    "actor_call": actor_bench.actor_call,
    "actor_spawn": actor_bench.actor_spawn,
    "actor_shutdown": actor_bench.actor_shutdown,
    "supervisor_restart": supervisor_bench.supervisor_restart,
    "resilience_overhead": resilience_bench.resilience_overhead,
    "provider_overhead": provider_bench.provider_overhead,
    "pool_primary": pool_bench.pool_primary,
    "pool_failover": pool_bench.pool_failover,
    "tool_call": tool_bench.tool_call,
    "run_node": run_bench.run_node,
    "run_memory": run_bench.run_memory,
    "journal_append": journal_bench.journal_append,
    "run_resume": journal_bench.run_resume,
    "redis_limiter": fleet_bench.redis_limiter,
    "pg_journal_append": fleet_bench.pg_journal_append,
}

OUT = Path(__file__).resolve().parent / "out" / "latest.json"


def held(row: Row) -> str:
    """Whether the row's exact ratio meets its target (``>= 0.7``, ``<= 50 KB/run``):
    ``yes`` or ``NO`` — the table rounds, this does not; ``-`` for a target that is not a
    bound (``~1 (linear)``: read the ratio)."""
    op, _, rest = row.target.partition(" ")
    try:
        bound = float(rest.split()[0]) if rest else None
    except ValueError:
        bound = None
    if op not in (">=", "<=") or bound is None:
        return "-"
    return "yes" if (row.ratio >= bound if op == ">=" else row.ratio <= bound) else "NO"


def main(argv: list[str]) -> int:
    names = argv or list(BENCHMARKS)
    unknown = [n for n in names if n not in BENCHMARKS]
    if unknown:
        print(f"unknown benchmark(s): {', '.join(unknown)}; known: {', '.join(BENCHMARKS)}")
        return 2
    rows: list[Row] = []
    for name in names:
        print(f"running {name} ...", flush=True)
        rows.extend(BENCHMARKS[name]())
    print()
    print(
        f"{'name':<28} {'value':>14} {'unit':<12} {'baseline':>14} {'ratio':>7}  "
        f"{'target':<8}  held"
    )
    for row in rows:
        print(
            f"{row.name:<28} {row.value:>14.2f} {row.unit:<12} {row.baseline:>14.2f} "
            f"{row.ratio:>7.3f}  {row.target:<8}  {held(row)}"
        )
    OUT.parent.mkdir(parents=True, exist_ok=True)
    existing = json.loads(OUT.read_text()) if OUT.exists() and argv else []
    kept = [r for r in existing if r["name"] not in {row.name for row in rows}]
    OUT.write_text(json.dumps(kept + [row.as_dict() for row in rows], indent=2) + "\n")
    print(f"\nwrote {OUT.relative_to(Path.cwd()) if OUT.is_relative_to(Path.cwd()) else OUT}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
