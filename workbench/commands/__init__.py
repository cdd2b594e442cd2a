"""One module per `wikirag` sub-command family; each exposes ``register(subparsers)``.

cli.py discovers the modules here, so adding a command never edits a shared file.
"""
