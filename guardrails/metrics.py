"""Prometheus metrics: the public names and labels, and the recorder that fills them: ``guardrails.observe.metrics``, at the path it had before."""

from .observe import metrics as _moved
from .observe.metrics import *  # noqa: F403

__all__ = list(_moved.__all__)
