"""Exceptions raised to the developer.

Results are values: a tool call that goes wrong returns a ``ToolResult`` with a
closed outcome. Exceptions are for misuse of the library and for deliberate
stops::

    GuardrailsError
    ├── ConfigurationError        raised at registration or construction
    │   ├── SchemaError           a tool schema that does not compile
    │   └── DuplicateNameError    two guards or tools with one name
    ├── UsageError                an entry point called the wrong way
    │   └── TicketClosed          a ticket completed, failed or closed a second time
    ├── NotConfigured             raised *by a guard* that lacks configuration;
    │                             the guard boundary turns it into not_evaluated
    └── StopRun                   a deliberate, non-retryable stop of the workflow
        └── LimitExceeded         a cap was crossed
"""

from __future__ import annotations

__all__ = [
    "ConfigurationError",
    "DuplicateNameError",
    "GuardrailsError",
    "LimitExceeded",
    "NotConfigured",
    "SchemaError",
    "StopRun",
    "TicketClosed",
    "UsageError",
]


class GuardrailsError(Exception):
    """Root of every exception this library raises."""


class ConfigurationError(GuardrailsError, ValueError):
    """A guard, tool or engine was configured wrongly. Names the culprit."""


class SchemaError(ConfigurationError):
    """A tool's JSON Schema is invalid."""


class DuplicateNameError(ConfigurationError):
    """Two guards or two tools share a name."""


class UsageError(GuardrailsError, RuntimeError):
    """An entry point was called in a way it does not support."""


class TicketClosed(UsageError):
    """A ticket was completed or failed after it was settled (completed, failed,
    refused at admission, or closed when its turn ended)."""


class NotConfigured(GuardrailsError):
    """Raised by a guard that has no configuration for the subject in front of it."""


class StopRun(GuardrailsError):
    """A deliberate stop: the workflow must not go on, and retrying will not help."""

    retryable = False


class LimitExceeded(StopRun):
    """A cap (budget, rate, ceiling) was crossed."""
