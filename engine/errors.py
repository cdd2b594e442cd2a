"""Errors raised by the engine. Every message says what to do about it."""


class EngineError(Exception):
    """Base class for errors a user can act on (shown as one line by the CLI)."""


class ConfigError(EngineError):
    """A configuration key or value is invalid."""


class IndexMissingError(EngineError):
    """No index exists yet for this knowledge base."""


class UnknownNodeError(EngineError):
    """A node id does not exist in the knowledge base."""


class ProviderError(EngineError):
    """An embedding, rerank or LLM provider failed (timeout, HTTP error, bad response)."""
