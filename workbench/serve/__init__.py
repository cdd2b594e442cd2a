"""Serving: the HTTP API (``wikirag serve``), the MCP server (stdio and HTTP), who may call
them (Host/Origin/token guard) and the input caps every surface shares.
"""
