"""What the CLI prints and writes on the bundled wiki, with volatile fields masked.

Used by ``tests/test_behaviour_snapshot.py`` to show that a restructuring changed no
behaviour: eval JSON, every report format, the TREC files and the text of the main commands
are compared with the snapshot under ``tests/snapshots/wiki/``. Regenerate the snapshot
(after a change that is meant to alter output, said in the commit) with::

    HF_HUB_OFFLINE=1 python -m tests.behaviour_snapshot --write

The hash embedder keeps the run fast and identical on every machine; timings, dates, run
ids and temporary paths are masked because they differ on every run by design.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import io
import json
import os
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SNAPSHOT_DIR = REPO / "tests" / "snapshots" / "wiki"
CONFIG = "embedding:\n  provider: hash\n"

# (output file name, CLI arguments). Each command's stdout becomes the file's content,
# except where the command writes the file itself (``{out}``).
COMMANDS: list[tuple[str, list[str]]] = [
    ("index.txt", ["index"]),
    ("tree.txt", ["tree"]),
    ("config.txt", ["config"]),
    ("search_hybrid.json", ["search", "检索增强生成的分块策略", "--json"]),
    ("search_keyword.txt", ["search", "chunk overlap", "--mode", "keyword"]),
    ("search_vector.txt", ["search", "向量数据库", "--mode", "vector", "--top-k", "3"]),
    (
        "eval.json",
        [
            "eval",
            "--modes",
            "hybrid",
            "vector",
            "keyword",
            "--answers",
            "--json",
            "{out}",
            "--trec-run",
            "{dir}/run.trec",
            "--trec-qrels",
            "{dir}/qrels.trec",
        ],
    ),
    ("eval.txt", ["eval", "--no-save"]),
    ("failures.txt", ["failures"]),
    ("failures.json", ["failures", "--json"]),
    ("scorecard.txt", ["scorecard"]),
    ("report.md", ["report", "--format", "md"]),
    # The scorecard is computed once more for the Markdown report; the other formats skip it
    # to keep the test short (scorecard.txt and report.md already pin it).
    ("report.csv", ["report", "--format", "csv", "--no-scorecard"]),
    ("report.json", ["report", "--format", "json", "--no-scorecard"]),
    ("report.html", ["report", "--format", "html", "--no-scorecard"]),
    ("report_trec_run.txt", ["report", "--format", "trec-run", "--no-scorecard"]),
]

# No LLM (the extractive chat answers), no network, the same columns on every terminal.
_ENV: dict[str, str | None] = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "COLUMNS": "120",
    "OPENAI_API_KEY": None,
    "OPENAI_BASE_URL": None,
    "WIKIRAG_LANG": None,
}

_VOLATILE_KEY = re.compile(
    r"(latency|_ms$|^ms$|seconds|elapsed|duration|time|date|created|started|finished|"
    r"run_id|^id$|path|index_dir|host|pid|python|platform|version|qps|rss|fingerprint|build_id|"
    r"^table$|timings)",
    re.I,
)
_MASKS = [
    (
        re.compile(
            r"\d{4}-\d{2}-\d{2}[T _]\d{2}[:\-]?\d{2}([:\-]?\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?"
        ),
        "<date>",
    ),
    (re.compile(r"\d{8}-\d{6}(-\w+)?"), "<stamp>"),
    (re.compile(r"\d+(\.\d+)?\s*(ms|s)\b"), "<t>"),
    (re.compile(r"[\d.]+\s*(MB|MiB|GB|KB|kB)\b"), "<size>"),
    # The per-stage timings line of `wikirag search`: "(expand 0.0 · embed 0.1 · ...)".
    (
        re.compile(r"\b(expand|embed|vector|bm25|fusion|rerank|inject) (\d+(\.\d+)?|<t>)(?= ·|\))"),
        r"\1 <t>",
    ),
]


def mask_json(value: object, key: str = "") -> object:
    if key and _VOLATILE_KEY.search(key):
        return "<masked>"
    if isinstance(value, dict):
        return {k: mask_json(v, str(k)) for k, v in value.items()}
    if isinstance(value, list):
        return [mask_json(v) for v in value]
    if isinstance(value, str):
        return mask_text(value)
    if isinstance(value, float):
        # Sums over dicts may add in another order from run to run: 0.65 vs 0.6499999999999999.
        return round(value, 9)
    return value


def mask_text(text: str, tmp: str = "") -> str:
    if tmp:
        text = text.replace(tmp, "<tmp>")
    for pattern, repl in _MASKS:
        text = pattern.sub(repl, text)
    return text


def _normalise(name: str, text: str, tmp: str) -> str:
    text = text.replace(tmp, "<tmp>")
    if name.endswith(".json"):
        try:
            data = json.loads(text)
        except json.JSONDecodeError:
            return mask_text(text, tmp)
        return json.dumps(mask_json(data), ensure_ascii=False, indent=1, sort_keys=True) + "\n"
    if name.endswith(".csv"):
        rows = list(csv.reader(io.StringIO(text)))
        masked = (
            {i for i, head in enumerate(rows[0]) if _VOLATILE_KEY.search(head)} if rows else set()
        )
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        for n, row in enumerate(rows):
            writer.writerow([("<masked>" if n and i in masked else c) for i, c in enumerate(row)])
        return mask_text(out.getvalue(), tmp)
    if name.endswith(".html"):
        # The metric cards show p50/p95 without a unit.
        text = re.sub(
            r'<div class="v">[^<]*</div><div class="k">([^<]*(?:p50|p95)[^<]*)</div>',
            r'<div class="v"><t></div><div class="k">\1</div>',
            text,
        )
        # Figures carry latency histograms and plotly's random div ids: keep the page's
        # text and structure, drop the embedded figure data.
        text = re.sub(r"<script[^>]*>.*?</script>", "<script/>", text, flags=re.S)
        text = re.sub(r'id="[0-9a-f-]{36}"', 'id="<uuid>"', text)
    return mask_text(text, tmp)


def generate() -> dict[str, str]:
    """Run every command in a scratch copy of the bundled wiki; return name -> masked text.

    The commands run in this process (``workbench.cli.main``), as a user's shell would run
    them one after another, so the test pays for Python's start-up and imports once.
    """
    from workbench.cli import main as cli_main

    results: dict[str, str] = {}
    saved_env = {k: os.environ.get(k) for k in _ENV}
    saved_cwd = os.getcwd()
    with tempfile.TemporaryDirectory(prefix="wikirag-snap-") as tmp_s:
        tmp = Path(tmp_s)
        shutil.copytree(REPO / "wiki", tmp / "wiki")
        (tmp / "datasets").mkdir()
        shutil.copy(REPO / "datasets" / "wiki.yaml", tmp / "datasets" / "wiki.yaml")
        (tmp / "experiments" / "wiki").mkdir(parents=True)
        (tmp / "experiments" / "wiki" / "baseline.yaml").write_text(CONFIG, encoding="utf-8")
        try:
            for key, value in _ENV.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value
            os.chdir(tmp)
            for name, args in COMMANDS:
                target = tmp / name
                argv = [a.replace("{out}", str(target)).replace("{dir}", str(tmp)) for a in args]
                started = time.perf_counter()
                out, err = io.StringIO(), io.StringIO()
                with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                    rc = cli_main(argv)
                if os.environ.get("SNAPSHOT_TIMES"):
                    print(name, round(time.perf_counter() - started, 1), file=sys.stderr)
                if rc != 0:
                    raise RuntimeError(f"{name}: exit {rc}: {err.getvalue()[-2000:]}")
                text = target.read_text(encoding="utf-8") if "{out}" in args else out.getvalue()
                results[name] = _normalise(name, text, tmp_s)
            for extra in ("run.trec", "qrels.trec"):
                text = (tmp / extra).read_text(encoding="utf-8")
                results[extra] = _normalise(extra, text, tmp_s)
        finally:
            os.chdir(saved_cwd)
            for key, value in saved_env.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="rewrite the snapshot")
    args = parser.parse_args()
    results = generate()
    if args.write:
        SNAPSHOT_DIR.mkdir(parents=True, exist_ok=True)
        for name, text in results.items():
            (SNAPSHOT_DIR / name).write_text(text, encoding="utf-8")
        print(f"wrote {len(results)} files to {SNAPSHOT_DIR}")
        return
    for name, text in results.items():
        print(f"{name}: {len(text)} chars")


if __name__ == "__main__":
    main()
