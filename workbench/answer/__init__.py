"""Answering: the LLM client, the chat loop with its refusal judge and safe rendering,
answer metrics, kept conversations, drafting and chapter summaries.

Builds on ``workbench.eval`` and ``engine``; never imports the apps (cli, serve, ui).
"""
