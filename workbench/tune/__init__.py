"""Tuning: accept/rollback experiments under a statistical rule, the optimizer and its
search space, sweeps, config comparison, the change catalog and the 9-dimension scorecard.

Experiments: ``experiments`` (score and decide one change), ``experiment_store`` (log,
baselines, lock, recovery), ``experiment_log`` / ``experiment_history`` (records read and
written), ``catalog_walk`` (auto-optimize), ``gate`` (CI). Optimizer: ``optimizer``,
``study``, ``study_figures``. Scorecard: ``scorecard`` over ``dimension`` and the
``*_dimension(s)`` modules, ``suggestions``, ``scorecard_markdown``.

Builds on ``workbench.eval``; never imports the apps (cli, serve, ui), ``answer`` or ``export``.
"""
