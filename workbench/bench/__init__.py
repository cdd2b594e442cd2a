"""`wikirag bench`: indexing, query latency, exactness and memory of the engine, in one run.

Everything is measured in ONE process against a fresh index in a temp folder:

- ``embed_only_s``: the embedder alone over exactly the texts the indexer embeds (every
  chapter's ``embed_text``, its passages' texts when ``index.passage_chars`` > 0, and the
  expansion vocabulary terms of the built index), in the indexer's batch sizes, after the
  model is loaded and warm;
- ``index_full_s`` / ``index_incremental_s``: ``build_index`` from scratch, then again
  after one chapter of one file was edited (the KB is a temp copy, never the original);
- per-query latency (wall clock around ``Engine.search``, after a warm-up) of the
  ``vector``, ``keyword``, ``hybrid`` and ``hybrid_rerank`` modes, and of LanceDB's own
  hybrid search (vector + FTS over the same jieba token column, ``RRFReranker``) as a peer;
- exactness: top-10 agreement of the vector channel with numpy brute-force cosine over
  the stored vectors, and of our BM25 with ``rank_bm25.BM25Okapi`` (on a sample if big);
- peak RSS (``ru_maxrss``) at each stage, and the load average (the numbers are wall
  clock on a shared machine: medians and ratios are what to compare).

``--synthetic N`` writes N chapters of pseudo-Chinese/English text from a fixed vocabulary
(deterministic seed) as Markdown files first. Cached re-scoring (``bench_rescoring``) times
what the evaluator does without model calls: 1,000 queries, an experiment, a 25-point sweep.

The package owns the `wikirag bench` command's measurements: ``run`` (the one run and the
JSON keys it writes), its stages ``indexing`` (parse, embed, full and incremental builds),
``latency`` (the queries, each mode, rerank) and ``exactness`` (agreement with brute force
and rank_bm25), ``measure`` (RSS, load, percentiles, top-n overlap), ``synthetic`` and
``queries`` (what it runs on), ``peer`` (LanceDB's hybrid search as a peer), ``serving`` (a
fresh serving process), ``targets`` (the issue targets) and ``rescoring`` (``--rescore``).
Benchmarks that are not a user command live in ``benchmarks/``.
"""
