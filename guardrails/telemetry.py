"""OpenTelemetry spans for the choke-points, after the GenAI semantic conventions: ``guardrails.observe.telemetry``, at the path it had before."""

from .observe import telemetry as _moved
from .observe.telemetry import *  # noqa: F403

__all__ = list(_moved.__all__)
