"""Rating write latency on a large draft pool: ``python -m brushrl.pool.bench [--rows 2000]``.

Builds a draft of ``--rows`` paintings whose rows carry the starter pool's sketch code (so the
manifest has a realistic size), then times ``PoolWriter.rate`` (lock, read, change, fsync,
``os.replace``) and a cached ``PoolWriter.rows``. Prints a table and writes ``--json``.
Numbers are only meaningful on a quiet machine.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from brushrl.pool.store import PoolRow, PoolWriter, ReferencePool, atomic_write, init_pool, manifest_text


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", type=int, default=2000)
    p.add_argument("--ratings", type=int, default=20)
    p.add_argument("--starter", default="pools/starter")
    p.add_argument("--json", default="pool_bench.json", help="where to write the results")
    args = p.parse_args(argv)
    starter = ReferencePool(args.starter).entries
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "big"
        writer = init_pool(root, "bench")
        data = starter[0].path.read_bytes()
        (root / "x.png").write_bytes(data)
        rows = [PoolRow(id=f"c{i}", tier="unrated", png="x.png", sha256=starter[0].sha256,
                        prompt=starter[i % len(starter)].prompt, source="bench", code=starter[i % len(starter)].code)
                for i in range(args.rows)]
        atomic_write(root / "manifest.jsonl", manifest_text(rows).encode())
        size_mb = (root / "manifest.jsonl").stat().st_size / 1e6
        writer = PoolWriter(root)
        rate_s = []
        for i in range(args.ratings):
            t = time.perf_counter()
            writer.rate(f"c{i}", "good", "bench")
            rate_s.append(time.perf_counter() - t)
        t = time.perf_counter()
        writer.rows()
        rows_s = time.perf_counter() - t
    result = {"rows": args.rows, "manifest_mb": round(size_mb, 2), "ratings": args.ratings,
              "rate_median_ms": round(1000 * statistics.median(rate_s), 1), "rate_max_ms": round(1000 * max(rate_s), 1),
              "rows_cached_ms": round(1000 * rows_s, 1)}
    print(f"{'rows':>6} {'manifest MB':>12} {'rate median ms':>15} {'rate max ms':>12} {'rows() ms':>10}")
    print(f"{result['rows']:>6} {result['manifest_mb']:>12} {result['rate_median_ms']:>15} "
          f"{result['rate_max_ms']:>12} {result['rows_cached_ms']:>10}")
    Path(args.json).write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
