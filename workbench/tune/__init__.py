"""Tuning: accept/rollback experiments under a statistical rule, the optimizer and its
search space, sweeps, config comparison, the change catalog and the 9-dimension scorecard.

Builds on ``workbench.eval``; never imports the apps (cli, serve, ui).
"""
