"""Passage vectors, measured before they are built into the index: window size, overlap,
title prefix and how a chapter's passages are scored, on the vector channel alone.

    python benchmarks/bench_passages.py [--sets wiki,vue,handbook,cmrc,faq-written,faq-headings]
        [--grid "200:50,400:100"] [--out benchmarks/results/passages_grid.json]

Per set: every chapter's vector as the index embeds it (``embed_text``), plus, for each
window/overlap in the grid, the passages of ``engine.passages.split_passages`` over the
chapter's whole text (with and without its title as a prefix), embedded with the default
embedder. Embeddings are cached by text under ``<cache>/passage-vectors`` so re-runs with
other scorers cost nothing. Scored: MRR@10 / Hit@5 of the vector channel (exact cosine,
all chapters) with a chapter's score as

- ``chapter``: today's one vector per chapter,
- ``max``: the best of the chapter vector and its passages,
- ``mean2``: the mean of the two best of those,
- ``mix<a>``: a * chapter + (1 - a) * best passage.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))


class VectorCache:
    """Text -> vector, on disk between runs (keyed by the embedder's signature and text)."""

    def __init__(self, path: Path, embedder) -> None:
        self.path, self.embedder = path, embedder
        self.known: dict[str, np.ndarray] = {}
        if path.is_file():
            z = np.load(path)
            self.known = dict(zip(z["keys"].tolist(), z["vecs"], strict=True))

    def __call__(self, texts: list[str]) -> np.ndarray:
        keys = [hashlib.sha1(t.encode()).hexdigest() for t in texts]
        todo = sorted(
            {k: t for k, t in zip(keys, texts, strict=True) if k not in self.known}.items()
        )
        if todo:
            vecs = self.embedder.embed_documents([t for _, t in todo])
            self.known.update(zip([k for k, _ in todo], vecs, strict=True))
            self.path.parent.mkdir(parents=True, exist_ok=True)
            np.savez(
                self.path, keys=np.array(list(self.known)), vecs=np.stack(list(self.known.values()))
            )
        return np.stack([self.known[k] for k in keys]) if keys else np.zeros((0, 512), np.float32)


def ranks_mrr(scores: np.ndarray, ids: list[str], items) -> dict[str, float]:
    """MRR@10 and Hit@5 of a (queries, chapters) score matrix (ties: smaller id first)."""
    order = np.argsort(-scores, axis=1, kind="stable")[:, :10]
    mrr = hit5 = 0.0
    for qi, item in enumerate(items):
        rel = set(item.relevant)
        for r, c in enumerate(order[qi]):
            if ids[c] in rel:
                mrr += 1.0 / (r + 1)
                hit5 += r < 5
                break
    n = max(1, len(items))
    return {"mrr": round(mrr / n, 4), "hit@5": round(hit5 / n, 4)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cache", default=str(ROOT / ".wikirag" / "bench"))
    ap.add_argument("--sets", default="wiki,vue,handbook,cmrc")
    ap.add_argument("--grid", default="200:50,400:100")
    ap.add_argument("--prefix", default="title,none")
    ap.add_argument("--out", default=str(ROOT / "benchmarks/results/passages_grid.json"))
    args = ap.parse_args(argv)
    import bench_defaults as bd

    from engine.config import EmbeddingConfig
    from engine.embedding import make_embedder
    from engine.passages import passage_texts
    from engine.rows import embed_text
    from engine.tree import parse_kb
    from workbench.eval import golden

    emb = make_embedder(EmbeddingConfig())
    cache = Path(args.cache)
    by_name = {s.name: s for s in bd.bench_sets(bd.SHARED)}
    out: dict = {"created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    out.update(load_start=[round(x, 2) for x in os.getloadavg()], embedder=emb.signature.model)
    out["sets"] = {}
    for name in args.sets.split(","):
        bs = by_name[name]
        kb, ds = bs.kb, bs.dataset
        if name == "cmrc":
            kb, ds = bd.prepare_cmrc(bd.SHARED / "benchmarks" / "cmrc2018-trial", cache / "cmrc")
        vc = VectorCache(cache / "passage-vectors" / f"{bs.index_name}.npz", emb)
        nodes = sorted(parse_kb(kb).nodes.values(), key=lambda n: n.node_id)
        ids = [n.node_id for n in nodes]
        items = golden.load(ds).answerable()
        t0 = time.perf_counter()
        chap = vc([embed_text(n, 1500) for n in nodes])
        q = np.stack([emb.embed_query(i.query) for i in items])
        base = q @ chap.T
        row: dict = {
            "chapters": len(nodes),
            "queries": len(items),
            "chapter": ranks_mrr(base, ids, items),
        }
        for spec in args.grid.split(","):
            window, overlap = (int(x) for x in spec.split(":"))
            for prefix in args.prefix.split(","):
                owners: list[int] = []
                texts: list[str] = []
                for ci, n in enumerate(nodes):
                    for t in passage_texts(n, window, overlap, title=prefix == "title"):
                        owners.append(ci)
                        texts.append(t)
                pv = vc(texts)
                own = np.asarray(owners)
                ps = q @ pv.T if len(texts) else np.zeros((len(items), 0))
                best = np.full_like(base, -1.0)
                second = np.full_like(base, -1.0)
                # best and second-best passage per chapter (vectorised over queries)
                for col in range(ps.shape[1]):
                    c = own[col]
                    s = ps[:, col]
                    hi = s > best[:, c]
                    second[:, c] = np.where(hi, best[:, c], np.maximum(second[:, c], s))
                    best[:, c] = np.maximum(best[:, c], s)
                has = best > -1.0
                top = np.where(has, np.maximum(base, best), base)
                low = np.where(has, np.minimum(base, best), base)
                sec = np.where(has, np.maximum(low, second), base)
                res = {
                    "passages": len(texts),
                    "max": ranks_mrr(top, ids, items),
                    "mean2": ranks_mrr((top + sec) / 2, ids, items),
                }
                for a in (0.3, 0.5, 0.7):
                    res[f"mix{a}"] = ranks_mrr(
                        np.where(has, a * base + (1 - a) * best, base), ids, items
                    )
                row[f"w{window}o{overlap}-{prefix}"] = res
                print(name, spec, prefix, json.dumps(res), file=sys.stderr)
        row["seconds"] = round(time.perf_counter() - t0, 1)
        out["sets"][name] = row
        out["load_end"] = [round(x, 2) for x in os.getloadavg()]
        Path(args.out).write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
