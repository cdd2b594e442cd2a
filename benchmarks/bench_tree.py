"""Chapter-tree parse speed on a real corpus (default: TiDB's Chinese docs, 1,222 files).

    python benchmarks/bench_tree.py [--kb DIR] [--repeat 3] [--json benchmarks/results/tree.json]

Writes {files, chapters, parse_s (median of the runs), files_per_s, ...} and prints it.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path

from engine.atomic import atomic_write_text
from engine.tree import parse_kb

REPO = Path(__file__).resolve().parent.parent
DEFAULT_KB = REPO.parent / "shared" / "data" / "corpora" / "pingcap-docs-cn"


def run(kb: Path, repeat: int) -> dict[str, object]:
    """Parse ``kb`` ``repeat`` times; the median wall time is the figure."""
    if repeat < 1:
        raise ValueError("repeat must be at least 1")
    times = []
    stats: dict[str, int] = {}
    problems = 0
    for _ in range(repeat):
        start = time.perf_counter()
        kb_tree = parse_kb(kb)
        times.append(time.perf_counter() - start)
        stats, problems = kb_tree.stats(), len(kb_tree.problems)
    files = stats["totalDocuments"]
    parse_s = statistics.median(times)
    size = sum(p.stat().st_size for p in kb.rglob("*.md"))
    return {
        "kb": kb.name,
        "files": files,
        "chapters": stats["totalChapters"],
        "problems": problems,
        "megabytes": round(size / 1e6, 2),
        "parse_s": round(parse_s, 3),
        "files_per_s": round(files / parse_s, 1),
        "runs_s": [round(t, 3) for t in times],
        "python": platform.python_version(),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kb", type=Path, default=DEFAULT_KB, help="KB folder to parse")
    ap.add_argument("--repeat", type=int, default=3, help="runs; the median is reported")
    ap.add_argument("--json", type=Path, default=REPO / "benchmarks" / "results" / "tree.json")
    args = ap.parse_args(argv)
    if not args.kb.is_dir():
        sys.stderr.write(f"bench_tree: {args.kb} not found; pass --kb DIR\n")
        return 2
    result = run(args.kb, args.repeat)
    atomic_write_text(args.json, json.dumps(result, indent=2) + "\n")
    print(
        f"{result['kb']}: {result['files']} files ({result['megabytes']} MB), "
        f"{result['chapters']} chapters, parse {result['parse_s']} s (median of {args.repeat}), "
        f"{result['files_per_s']} files/s -> {args.json}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
