"""`make bench`: every benchmark, each a ratio against a baseline measured in
the same run on this machine; exits non-zero when a target is missed."""

from __future__ import annotations

import asyncio
import sys

from bench.plan_mode_read import run as plan_mode_read


def main() -> int:
    results = [asyncio.run(plan_mode_read())]
    for result in results:
        print(result.report())
    return 0 if all(r.met for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
