"""Render time of each workbench page under AppTest once warm (median of 3 runs).

Builds the same small workspace as tests/ui (3 wiki files, hash embedder, 5 queries, one
saved run) in a temp folder, so the numbers measure the UI layer, not model loading.
Writes benchmarks/results/ui.json.

    python benchmarks/bench_ui.py [--kb wiki] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from streamlit.testing.v1 import AppTest

from engine.config import EngineConfig
from engine.tree import parse_kb

REPO = Path(__file__).resolve().parent.parent
APP = REPO / "workbench" / "ui" / "app.py"
PAGES = (
    "overview",
    "knowledge_base",
    "golden_set",
    "evaluate",
    "compare",
    "experiments",
    "scorecard",
    "chat",
    "reports",
)
FILES = ("rag/parent-child-chunks.md", "evaluation/evaluation-faq.md", "agents/mcp.md")


def workspace(root: Path, kb_src: Path) -> dict[str, Path]:
    from engine.indexer import build_index
    from workbench.eval import golden
    from workbench.eval.engines import evaluator
    from workbench.eval.run_record import save_run
    from workbench.workspace import resolve

    kb_dir = root / "kb"
    for rel in FILES:
        (kb_dir / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(kb_src / rel, kb_dir / rel)
    kb = parse_kb(kb_dir)
    cfg = EngineConfig().with_overrides({"embedding.provider": "hash", "expansion.enabled": False})
    (root / "experiments" / "kb").mkdir(parents=True)
    cfg.save(root / "experiments" / "kb" / "baseline.yaml")
    build_index(kb, cfg, str(root / "index"))
    chapters = [n for n in kb.nodes.values() if n.level >= 2][:6]
    items = tuple(
        golden.GoldenItem(id=f"q{i:03d}", query=n.title, relevant=(n.node_id,))
        for i, n in enumerate(chapters, 1)
    )
    (root / "datasets").mkdir()
    golden.save(golden.GoldenSet("kb", items), root / "datasets" / "kb.yaml")
    ws = resolve(
        kb_dir, root / "index", dataset=root / "datasets" / "kb.yaml",
        experiments_root=root / "experiments",
    )  # fmt: skip
    gs = golden.load(ws.dataset)
    save_run(evaluator(ws, cfg).run(gs, cfg, modes=["hybrid"]), ws.runs_dir)
    return {
        "WIKIRAG_KB": kb_dir,
        "WIKIRAG_INDEX": root / "index",
        "WIKIRAG_DATASET": ws.dataset,
        "WIKIRAG_EXPERIMENTS": root / "experiments",
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kb", default=str(REPO / "wiki"), help="where the sample files come from")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out", default=str(REPO / "benchmarks" / "results" / "ui.json"))
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        env = workspace(Path(tmp), Path(args.kb))
        os.environ.update({k: str(v) for k, v in env.items()})
        at = AppTest.from_file(str(APP), default_timeout=300)
        at.run()
        results = {}
        for page in PAGES:
            at.switch_page(f"views/{page}.py").run()  # warm: caches, engine, scorecard
            if at.exception:
                raise SystemExit(f"{page}: {at.exception[0].message}")
            times = []
            for _ in range(args.repeat):
                t0 = time.perf_counter()
                at.switch_page(f"views/{page}.py").run()
                times.append((time.perf_counter() - t0) * 1000)
            results[page] = {
                "median_ms": round(statistics.median(times), 1),
                "runs_ms": [round(t, 1) for t in times],
            }
            print(f"{page:15s} {results[page]['median_ms']:8.1f} ms")
    out = {
        "benchmark": "ui page render (AppTest, warm, hash embedder, 3-file KB)",
        "repeat": args.repeat,
        "python": platform.python_version(),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "pages": results,
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    print(f"-> {args.out}")


if __name__ == "__main__":
    main()
