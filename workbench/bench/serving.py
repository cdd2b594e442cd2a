"""What serving costs: a fresh process opens the index and answers the bench's queries."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from engine.config import EngineConfig
from workbench.bench.measure import percentiles

_SERVING_PROBE = """
import json, resource, statistics, sys, time
from engine.config import EngineConfig
from engine.search import Engine
args = json.loads(open(sys.argv[1], encoding="utf-8").read())
cfg = EngineConfig.from_yaml(args["config"]) if args["config"] else EngineConfig()
t = time.perf_counter()
engine = Engine.open(args["kb"], args["index"], cfg)
open_s = time.perf_counter() - t
engine.warm_up()
lat = []
for q in args["queries"]:
    t = time.perf_counter()
    engine.search(q, mode="hybrid", rerank=False)
    lat.append((time.perf_counter() - t) * 1000)
# VmHWM, not ru_maxrss: a child's ru_maxrss starts from its parent's peak at the fork.
rss_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
try:
    for line in open("/proc/self/status", encoding="ascii"):
        if line.startswith("VmHWM:"):
            rss_kib = int(line.split()[1])
except OSError:
    pass
print(json.dumps({"open_s": open_s, "lat": lat, "rss_kib": rss_kib}))
"""


def serving_probe(
    cfg: EngineConfig, kb_dir: Path, index: Path, queries: Sequence[str], work: Path
) -> dict[str, Any]:
    """Peak RSS and hybrid latency of a fresh process that opens the index and answers
    ``queries`` (the KB parsed, the snapshot loaded, models warm): what serving costs."""
    work.mkdir(parents=True, exist_ok=True)
    args = work / "args.json"
    args.write_text(
        json.dumps(
            {
                "config": cfg.to_yaml(),
                "kb": str(kb_dir),
                "index": str(index),
                "queries": list(queries),
            },
            ensure_ascii=False,
        ),
        encoding="utf-8",
    )
    proc = subprocess.run(
        [sys.executable, "-c", _SERVING_PROBE, str(args)],
        capture_output=True,
        text=True,
        check=False,
        timeout=3600,
    )
    if proc.returncode != 0:
        raise ValueError(f"the serving probe failed: {proc.stderr.strip().splitlines()[-1:]}")
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    pc = percentiles(res["lat"])
    return {
        "serving_rss_mb": round(res["rss_kib"] / 1024, 1),
        "serving_open_s": round(res["open_s"], 3),
        "serving_hybrid_p50_ms": pc["p50"],
        "serving_hybrid_p95_ms": pc["p95"],
    }
