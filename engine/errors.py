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


def yaml_error_summary(exc: Exception) -> str:
    """One line for a PyYAML/ruamel error, e.g. 'line 5, column 1: found unexpected end of
    stream (while scanning a quoted scalar at line 4)'.

    Their str() spans several lines with a source excerpt, which breaks the CLI's
    one-line error contract.
    """
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None)
    if problem is None:
        return " ".join(str(exc).split())
    out = f"line {mark.line + 1}, column {mark.column + 1}: {problem}" if mark else str(problem)
    context, context_mark = getattr(exc, "context", None), getattr(exc, "context_mark", None)
    if context and context_mark is not None:
        out += f" ({context} at line {context_mark.line + 1})"
    return out
