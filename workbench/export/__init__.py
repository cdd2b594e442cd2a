"""Exports: reports of a run (HTML, Markdown, CSV, JSON, TREC) and the one CSV writer.

Reads run records and scorecards from ``workbench.eval`` / ``workbench.tune``.
"""
