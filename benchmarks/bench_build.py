"""Full index builds from scratch, old and new embedder side by side in one run.

    python benchmarks/bench_build.py [--kb ../shared/data/corpora/pingcap-docs-cn]
        [--configs round2,default,no-passages] [--out benchmarks/results/build_pingcap.json]

Each named config builds the whole corpus into a fresh temporary folder, one after the
other in this process (models loaded once, before the first build, so no build pays for
loading). Per build: seconds, the load average at its start and end, the chapters and
passages embedded, and the seconds spent in each progress stage (``embed`` covers the
row work and the embedding of each batch; ``lexical``, ``vocabulary`` and the rest are the
non-embedding work after it).

- ``round2``: round 2's default, the numpy USE model and one vector per chapter.
- ``default``: the built-in defaults (ONNX USE, passage vectors, ``embedding.workers`` 0 =
  one text at a time per CPU core).
- ``default-numpy``: the defaults with the old embedder (numpy USE): the same build, the
  embedder alone changed.
- ``no-passages`` / ``one-worker``: the defaults without passages / on one worker.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
SHARED = next(p / "shared" / "data" for p in ROOT.parents if (p / "shared" / "data").is_dir())

CONFIGS: dict[str, dict[str, object]] = {
    "round2": {"embedding.provider": "use", "index.passage_chars": 0},
    "default": {},
    "default-numpy": {"embedding.provider": "use"},
    "no-passages": {"index.passage_chars": 0},
    "one-worker": {"embedding.workers": 1},
}


def _load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


class Timed:
    """An embedder that counts the texts it embeds and the seconds it takes."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.texts, self.seconds = inner, 0, 0.0

    @property
    def signature(self) -> Any:
        return self.inner.signature

    def embed_documents(self, texts: list[str]) -> Any:
        t0 = time.perf_counter()
        out = self.inner.embed_documents(texts)
        self.seconds += time.perf_counter() - t0
        self.texts += len(texts)
        return out

    def embed_query(self, text: str) -> Any:
        return self.inner.embed_query(text)


def build_once(kb_dir: str, overrides: dict[str, object]) -> dict[str, object]:
    """One full build of ``kb_dir`` under the defaults with ``overrides``, timed by stage."""
    from engine.config import EngineConfig
    from engine.embedding import make_embedder
    from engine.indexer import build_index
    from engine.rows import node_passages
    from engine.tree import parse_kb

    cfg = EngineConfig().with_overrides(overrides)
    embedder = Timed(make_embedder(cfg.embedding))
    embedder.embed_documents(["warm up", "预热"])  # the model loads before the clock starts
    embedder.texts, embedder.seconds = 0, 0.0
    stages: dict[str, float] = {}
    last = [time.perf_counter()]

    def progress(done: int, total: int, stage: str) -> None:
        # Called when a batch of ``stage`` is done: the time since the last call is its.
        now = time.perf_counter()
        stages[stage] = stages.get(stage, 0.0) + now - last[0]
        last[0] = now

    load0 = _load()
    folder = tempfile.mkdtemp(prefix="wikirag-build-")
    try:
        t0 = time.perf_counter()
        kb = parse_kb(kb_dir)
        parsed = time.perf_counter() - t0
        last[0] = time.perf_counter()
        build_index(kb, cfg, str(Path(folder) / "index"), progress, embedder=embedder)
        total = time.perf_counter() - t0
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return {
        "overrides": overrides,
        "seconds": round(total, 1),
        "parse_s": round(parsed, 1),
        "stages_s": {k: round(v, 1) for k, v in stages.items()},
        "embedding_s": round(embedder.seconds, 1),
        "texts_embedded": embedder.texts,
        "texts_per_s": round(embedder.texts / max(embedder.seconds, 1e-9), 1),
        "other_s": round(total - embedder.seconds, 1),
        "chapters": len(kb.nodes),
        "passages": sum(len(node_passages(n, cfg)) for n in kb.nodes.values()),
        "load_start": load0,
        "load_end": _load(),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kb", default=str(SHARED / "corpora" / "pingcap-docs-cn"))
    ap.add_argument("--configs", default="round2,default,no-passages")
    ap.add_argument("--out", default=str(ROOT / "benchmarks/results/build_pingcap.json"))
    args = ap.parse_args(argv)
    os.environ.setdefault("LANCEDB_LOG", "error")
    report: dict[str, object] = {
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "kb": args.kb,
        "cpus": os.cpu_count(),
        "command": " ".join(["benchmarks/bench_build.py", *(argv or sys.argv[1:])]),
        "builds": {},
    }
    builds: dict[str, object] = report["builds"]  # type: ignore[assignment]
    for name in args.configs.split(","):
        builds[name] = build_once(args.kb, CONFIGS[name])
        print(name, json.dumps(builds[name]), file=sys.stderr)
        Path(args.out).write_text(json.dumps(report, ensure_ascii=False, indent=1) + "\n")
    base = builds.get("round2")
    if isinstance(base, dict):
        report["speedup_vs_round2"] = {
            n: round(base["seconds"] / b["seconds"], 2)
            for n, b in builds.items()
            if isinstance(b, dict) and n != "round2"
        }
    Path(args.out).write_text(json.dumps(report, ensure_ascii=False, indent=1) + "\n")
    print(json.dumps(report.get("speedup_vs_round2", {})))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
