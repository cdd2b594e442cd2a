"""Exports of a run: one registry of formats (``formats``: HTML, Markdown, CSV, JSON, TREC
run and qrels) and the one CSV writer (``csv_writer``).

``report`` collects a report's data from a run record (``workbench.eval.run_record``), the
experiment log and a scorecard (``workbench.tune``); ``html_report`` (a jinja2 template),
``markdown_report`` and ``figures`` render it. Depends on eval and tune; nothing below the
apps imports it.
"""
