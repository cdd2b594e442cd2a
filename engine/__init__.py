"""WikiRAG engine: chapter trees and hybrid search over a Markdown knowledge base.

The package owns everything from Markdown files to ranked chapters: parsing, the index
and its life cycle, the retrieval channels, fusion and rerank, and the typed config they
all read. It imports nothing from ``workbench`` (evaluation, tuning, apps sit on top).

Module map, grouped by job (roughly in dependency order: a module mostly imports those above it):

Contracts and plumbing
  config         ``EngineConfig``: one frozen, typed config tree, YAML in/out, stable hash
  config_legacy  the values keys had before they existed, for configs saved then
  errors         ``EngineError`` and friends; messages say how to fix
  types          result types and the ``Embedder`` / ``Reranker`` protocols
  atomic         atomic file writes;  yaml_safe: YAML without alias bombs
  credentials    where API keys come from;  http_json: JSON-over-HTTP for providers
  heap           freed heap memory handed back to the OS after a large load (glibc)

Knowledge base -> chapter trees
  chapters       the model: ``Node``, ``Document``, ``KnowledgeBase``, ``Problem``
  front_matter   bytes -> text; YAML/TOML front matter split off
  markdown_scan  CommonMark block scan: headings, slugs, summaries
  tree           ``parse_kb`` / ``parse_document``: files -> ``Document`` trees
  parse_cache    parsed documents reused for unchanged files
  tree_io        ``chapter_trees.json`` export/import

Models and text
  models         the process's one cache of loaded embedder / reranker models
  embedding      embedding providers (texts -> unit float32 vectors)
  cjk            which characters are CJK ideographs (one definition)
  tokenizer      jieba tokenizer (+ optional stemming), stop words
  scripts        a query's script against the index's chapters (cross-lingual queries)
  sparse_counts  term-count matrices as data: count, align, patch rows, save, load
  lexical        BM25 / BM25F over a sparse term matrix
  bm25_batch     many queries x many k1/b settings at once (optimizer, evaluation)
  expansion      query expansion from the KB's own vocabulary
  prf            RM3 pseudo-relevance feedback: a second BM25 pass with the top chapters' terms
  rerank         cross-encoder providers and the passage they see

Index
  store          LanceDB tables (chapter rows, exact vector search) and side files
  ann            the approximate vector index: shape, search budget, search
  rows           chapter rows (texts, tokens, hashes, metadata) built in batches
  passages       a chapter cut into sentence windows for its passage vectors
  sign_codes     sign-bit codes: which of many vectors the vector channel scores exactly
  hash_tables    the manifest's per-node / per-file hashes: a base file + changes since
  manifest       ``manifest.json``: the current table, version, hashes, side files
  index_plan     what an update must do: KB hashes against the manifest's; freshness
  term_counts    an index's BM25 count matrices, stacked from batches or patched
  lexical_delta  BM25 counts as a base + a delta, so an update writes only what changed
  index_caches   the side files of a table version: BM25 counts, expansion vocabulary
  table_write    rows into the table: full build in batches, update of the changes
  indexer        build / incremental update / ANN index / atomic switch (manifest)
  ray_build      the same build fanned out over a Ray cluster (imported only with --ray)
  snapshot       one index version in memory: ids, vectors, filter columns, BM25

Search
  topn           exact top-n selection shared by both channels
  channels       expansion + BM25 and vector retrieval -> ``Candidates``
  fusion         the fusion registries: methods (rrf, convex, dbsf) and normalisations
  pipeline       pure fusion -> rerank merge -> injection -> cut (search and evaluation)
  response       ranked ids -> ``SearchResult``; node lookups and metadata
  shared         what engines of one index share: loaded state, model caches
  search         ``Engine``: open, search, chapter/children/siblings, stats, rebuild
"""

__version__ = "0.1.0"
