"""Evaluation: golden sets, metrics, paired statistics, pooling, TREC and BEIR files, the
evaluator (one run of a config over a golden set) and the analysis of its run records.

Depends on ``engine`` only (and ``workbench.workspace``); tuning, answering, exports and the
apps build on it.
"""
