"""HTTP serving under concurrent load: throughput and latency of POST /search.

    python benchmarks/bench_serve.py [--kb wiki] [--index DIR] [--config FILE]
        [--clients 8] [--requests 50] [--json benchmarks/results/serve.json]

Starts `wikirag serve` as a separate process on 127.0.0.1 (so the load generator does not
share the server's interpreter), builds the index first if there is none, then sends the
golden set's queries (datasets/<kb>.yaml, else a built-in list) from N concurrent clients,
R requests each, after a warm-up pass. Reports client-side latency p50/p95/p99, requests
per second and the engine's own ``took_ms``; any non-200 answer counts as an error.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx

from engine.atomic import atomic_write_text
from engine.yaml_safe import load_file

REPO = Path(__file__).resolve().parent.parent
FALLBACK_QUERIES = [
    "RAG 的切块策略有哪些？",
    "混合检索的 RRF 参数怎么定",
    "BM25 中文分词用什么",
    "父子块检索是什么",
    "how do we evaluate retrieval quality",
    "向量索引怎么调参",
]


def load_queries(kb: Path, dataset: Path | None) -> list[str]:
    path = dataset or REPO / "datasets" / f"{kb.resolve().name}.yaml"
    if path.is_file():
        data = load_file(path) or {}
        queries = [str(q["query"]) for q in data.get("queries", []) if q.get("query")]
        if queries:
            return queries
    return list(FALLBACK_QUERIES)


def percentile(values: list[float], p: float) -> float:
    """Nearest-rank percentile (the value below which p% of the observations fall)."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    rank = min(len(ordered), max(1, math.ceil(p / 100 * len(ordered))))
    return ordered[rank - 1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server(args: argparse.Namespace, port: int, log: Any) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "workbench.cli", "serve", "--kb", str(args.kb)]
    cmd += ["--host", "127.0.0.1", "--port", str(port)]
    if args.index:
        cmd += ["--index", str(args.index)]
    if args.config:
        cmd += ["--config", str(args.config)]
    for item in args.overrides:
        cmd += ["--set", item]
    if args.max_concurrent is not None:
        cmd += ["--max-concurrent", str(args.max_concurrent)]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    return subprocess.Popen(cmd, stdout=log, stderr=log, env=env, cwd=REPO)


def wait_ready(url: str, proc: subprocess.Popen, timeout_s: float = 300) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}; see its log")
        try:
            r = httpx.get(url + "/health", timeout=5)
            if r.status_code == 200:
                return r.json()
            if r.status_code == 503:
                raise RuntimeError(f"server has no index: {r.json()['reasons']}")
        except httpx.TransportError:
            pass
        time.sleep(0.25)
    raise RuntimeError("server did not become ready")


def load(url: str, queries: list[str], clients: int, requests: int, top_k: int) -> dict[str, Any]:
    latencies: list[float] = []
    took: list[float] = []
    errors: list[str] = []
    lock = threading.Lock()
    barrier = threading.Barrier(clients + 1)

    def client(i: int) -> None:
        mine_lat, mine_took, mine_err = [], [], []
        with httpx.Client(base_url=url, timeout=120) as c:
            barrier.wait()
            for j in range(requests):
                q = queries[(i * requests + j) % len(queries)]
                t = time.perf_counter()
                try:
                    r = c.post("/search", json={"query": q, "top_k": top_k})
                except httpx.HTTPError as exc:
                    mine_err.append(f"{type(exc).__name__}: {exc}")
                    continue
                mine_lat.append((time.perf_counter() - t) * 1000)
                if r.status_code != 200:
                    mine_err.append(f"HTTP {r.status_code}: {r.text[:200]}")
                else:
                    mine_took.append(float(r.json()["took_ms"]))
        with lock:
            latencies.extend(mine_lat)
            took.extend(mine_took)
            errors.extend(mine_err)

    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    for t in threads:
        t.start()
    barrier.wait()
    start = time.perf_counter()
    for t in threads:
        t.join()
    wall = time.perf_counter() - start
    n = clients * requests
    return {
        "clients": clients,
        "requests_per_client": requests,
        "requests": n,
        "errors": len(errors),
        "error_samples": errors[:5],
        "wall_s": round(wall, 3),
        "throughput_rps": round((n - len(errors)) / wall, 2),
        "latency_ms": {
            "p50": round(percentile(latencies, 50), 2),
            "p95": round(percentile(latencies, 95), 2),
            "p99": round(percentile(latencies, 99), 2),
            "mean": round(statistics.fmean(latencies), 2) if latencies else None,
            "max": round(max(latencies), 2) if latencies else None,
        },
        "engine_took_ms": {
            "p50": round(percentile(took, 50), 2),
            "p95": round(percentile(took, 95), 2),
        },
    }


def ensure_index(args: argparse.Namespace) -> dict[str, Any] | None:
    """Build (or update) the index first, so the server starts serving; returns the report."""
    from engine.config import parse_override
    from engine.indexer import build_index
    from engine.manifest import read_manifest
    from engine.store import Location
    from engine.tree import parse_kb
    from workbench.workspace import resolve

    ws = resolve(args.kb, args.index, args.config)
    cfg = ws.load_config()
    if args.overrides:
        cfg = cfg.with_overrides(dict(parse_override(s) for s in args.overrides))
    if read_manifest(Location(str(ws.index))) is not None and not args.reindex:
        return None
    report = build_index(parse_kb(ws.kb), cfg, str(ws.index))
    return report.to_dict()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kb", type=Path, default=REPO / "wiki")
    ap.add_argument("--index", type=Path, default=None, help="default: .wikirag/<kb>")
    ap.add_argument("--config", type=Path, default=None, help="default: the KB's baseline")
    ap.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--dataset", type=Path, default=None, help="queries (golden set YAML)")
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--requests", type=int, default=50, help="requests per client")
    ap.add_argument("--top-k", type=int, default=10)
    ap.add_argument("--max-concurrent", type=int, default=None, help="passed to wikirag serve")
    ap.add_argument("--reindex", action="store_true", help="update the index before serving")
    ap.add_argument("--json", type=Path, default=REPO / "benchmarks" / "results" / "serve.json")
    args = ap.parse_args(argv)
    if args.clients < 1 or args.requests < 1:
        sys.stderr.write("bench_serve: --clients and --requests must be at least 1\n")
        return 2

    index_report = ensure_index(args)
    load_before = os.getloadavg()[0]
    queries = load_queries(args.kb, args.dataset)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log_path = Path(tempfile.gettempdir()) / f"wikirag-bench-serve-{port}.log"
    sys.stderr.write(f"bench_serve: server log in {log_path}\n")
    with log_path.open("w", encoding="utf-8") as log:
        proc = start_server(args, port, log)
        try:
            t = time.perf_counter()
            health = wait_ready(url, proc)
            startup_s = time.perf_counter() - t
            stats = httpx.get(url + "/stats", timeout=30).json()
            for q in queries:  # warm-up: model caches, jieba, BM25 weights
                httpx.post(url + "/search", json={"query": q, "top_k": args.top_k}, timeout=120)
            single = load(url, queries, 1, args.requests, args.top_k)
            concurrent = load(url, queries, args.clients, args.requests, args.top_k)
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
    result = {
        "kb": args.kb.resolve().name,
        "chapters": stats.get("nodes"),
        "embedder": health.get("embedder"),
        "config_hash": health.get("config_hash"),
        "queries": len(queries),
        "top_k": args.top_k,
        "server_max_concurrent": args.max_concurrent,
        "server_startup_s": round(startup_s, 2),
        "index_built": index_report,
        "single_client": single,
        "concurrent": concurrent,
        "cpus": os.cpu_count(),
        # Other work on the machine skews every figure above; these say how busy it was.
        "load_avg_1m": {"before": round(load_before, 2), "after": round(os.getloadavg()[0], 2)},
        "python": platform.python_version(),
    }
    atomic_write_text(args.json, json.dumps(result, indent=2, ensure_ascii=False) + "\n")
    c = concurrent
    print(
        f"{result['kb']} ({result['chapters']} chapters, {result['embedder']}): "
        f"{c['clients']} clients x {c['requests_per_client']} requests: "
        f"{c['throughput_rps']} req/s, p50 {c['latency_ms']['p50']} ms, "
        f"p95 {c['latency_ms']['p95']} ms, {c['errors']} errors "
        f"(1 client: {single['throughput_rps']} req/s, p50 {single['latency_ms']['p50']} ms) "
        f"-> {args.json}"
    )
    return 1 if c["errors"] or single["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
