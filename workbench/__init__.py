"""WikiRAG workbench: golden sets, metrics, experiments, reports and the `wikirag` CLI."""

__version__ = "0.1.0"
