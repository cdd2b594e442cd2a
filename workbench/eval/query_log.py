"""An opt-in log of the questions users ask (HTTP, MCP, chat), to grow the golden set from.

Off unless asked for (``--log-queries`` on `serve`, `mcp` and `ask`, or
``WIKIRAG_LOG_QUERIES=1`` for every entry point of a workspace, the UI's Chat page
included). Only the question, the channel and the time are kept: no answer, no chapter
text, no header or key. The file sits beside the KB's index (``.wikirag/<kb>.queries.jsonl``),
one JSON object a line; entries older than the retention (30 days by default) are dropped
when a log is opened.

`wikirag golden sample --from-log` draws questions from it (random, most frequent, or in
proportion to frequency), leaving out near-duplicates of the set's queries and of each
other, and writes them to ``datasets/<name>.pending.yaml``: questions waiting for their
chapters to be judged before they join the set.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import random
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from engine.atomic import atomic_append_text, atomic_write_text
from engine.errors import EngineError

LOG_ENV = "WIKIRAG_LOG_QUERIES"
RETENTION_ENV = "WIKIRAG_LOG_RETENTION_DAYS"
DEFAULT_RETENTION_DAYS = 30
CHANNELS = ("http", "mcp", "chat")
STRATEGIES = ("random", "frequency", "proportional")
NEAR_DUPLICATE = 0.8  # Jaccard similarity of character bigrams


def log_path(index: Path) -> Path:
    """``.wikirag/wiki`` -> ``.wikirag/wiki.queries.jsonl`` (beside, not inside, the index:
    a rebuild replaces the index folder)."""
    return index.with_name(index.name + ".queries.jsonl")


def _stamp(t: dt.datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class QueryLog:
    path: Path
    retention_days: int = DEFAULT_RETENTION_DAYS

    def record(self, query: str, channel: str) -> None:
        """Append one question (nothing else about the request is kept)."""
        if channel not in CHANNELS:
            raise ValueError(f"channel must be one of {', '.join(CHANNELS)}")
        text = " ".join(query.split())
        if not text:
            return
        line = {"q": text, "channel": channel, "at": _stamp(dt.datetime.now(dt.UTC))}
        atomic_append_text(self.path, json.dumps(line, ensure_ascii=False) + "\n")

    def entries(self) -> list[dict[str, str]]:
        """The logged questions, oldest first (unreadable lines are skipped: the log is ours)."""
        if not self.path.is_file():
            return []
        out = []
        for line in self.path.read_text(encoding="utf-8").splitlines():
            try:
                d = json.loads(line)
            except ValueError:
                continue
            if isinstance(d, dict) and isinstance(d.get("q"), str):
                out.append({k: str(d.get(k, "")) for k in ("q", "channel", "at")})
        return out

    def prune(self, now: dt.datetime | None = None) -> int:
        """Drop entries older than the retention; returns how many were dropped."""
        entries = self.entries()
        cut = _stamp((now or dt.datetime.now(dt.UTC)) - dt.timedelta(days=self.retention_days))
        kept = [e for e in entries if e["at"] >= cut]
        if len(kept) != len(entries):
            atomic_write_text(
                self.path, "".join(json.dumps(e, ensure_ascii=False) + "\n" for e in kept)
            )
        return len(entries) - len(kept)


def query_log_for(
    index: Path,
    enabled: bool | None = None,
    retention_days: int | None = None,
    env: Mapping[str, str] | None = None,
) -> QueryLog | None:
    """The workspace's query log when logging is on (flag, else ``$WIKIRAG_LOG_QUERIES``)."""
    environ = os.environ if env is None else env
    on = enabled or environ.get(LOG_ENV, "").strip().lower() in ("1", "true", "yes", "on")
    if not on:
        return None
    days = retention_days
    if days is None:
        raw = environ.get(RETENTION_ENV, "").strip()
        try:
            days = int(raw) if raw else DEFAULT_RETENTION_DAYS
        except ValueError:
            raise EngineError(
                f"${RETENTION_ENV} must be a whole number of days; got {raw!r}"
            ) from None
    if days < 1:
        raise EngineError("the query log's retention must be at least 1 day")
    log = QueryLog(log_path(Path(index)), days)
    log.prune()
    return log


def _norm(text: str) -> str:
    return re.sub(r"[\W_]+", " ", text.lower()).strip()


def _bigrams(text: str) -> set[str]:
    s = _norm(text).replace(" ", "")
    return {s[i : i + 2] for i in range(len(s) - 1)} or {s}


def near_duplicate(a: str, b: str, threshold: float = NEAR_DUPLICATE) -> bool:
    """Whether two questions are the same up to case, punctuation and small edits."""
    x, y = _bigrams(a), _bigrams(b)
    return bool(x and y) and len(x & y) / len(x | y) >= threshold


def sample(
    entries: Iterable[Mapping[str, str]],
    n: int,
    strategy: str = "random",
    *,
    exclude: Iterable[str] = (),
    seed: int = 0,
) -> list[tuple[str, int]]:
    """Up to ``n`` (question, times asked) drawn by ``strategy``, no near-duplicates."""
    if strategy not in STRATEGIES:
        raise EngineError(f"--strategy must be one of {', '.join(STRATEGIES)}; got {strategy!r}")
    if n < 1:
        raise EngineError("--n must be at least 1")
    counts: Counter[str] = Counter()
    shown: dict[str, str] = {}
    for e in entries:
        key = _norm(e["q"])
        if key:
            counts[key] += 1
            shown.setdefault(key, e["q"])
    rng = random.Random(seed)
    keys = sorted(counts)
    if strategy == "frequency":
        order = sorted(keys, key=lambda k: (-counts[k], k))
    elif strategy == "random":
        order = rng.sample(keys, len(keys))
    else:  # proportional: weighted draws without replacement (Efraimidis & Spirakis 2006)
        order = sorted(keys, key=lambda k: rng.random() ** (1.0 / counts[k]), reverse=True)
    taken: list[str] = list(exclude)
    out: list[tuple[str, int]] = []
    for k in order:
        if len(out) >= n:
            break
        if any(near_duplicate(shown[k], t) for t in taken):
            continue
        taken.append(shown[k])
        out.append((shown[k], counts[k]))
    return out
