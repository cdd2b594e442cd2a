"""Answering: the LLM client, the chat with its refusal judge and safe rendering, answer
metrics, kept conversations, drafting and chapter summaries.

The chat (``chat.answer``) is split by job: ``loop`` (retrieve -> judge -> rewrite ->
answer) and ``tools`` (tool calling) over ``evidence`` (the judge), ``rewrite``,
``followup``, ``citations``, ``extractive``, ``sources``, ``terms`` and ``trace``.

Builds on ``workbench.eval`` and ``engine``; never imports the apps (cli, serve, ui).
"""
