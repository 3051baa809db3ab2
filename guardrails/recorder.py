"""The recorder interface: where every verdict, escape and outcome is counted: ``guardrails.observe.recorder``, at the path it had before."""

from .observe.recorder import (
    Recorder,
    Recorders,
    asafe_record,
    combine_recorders,
    log_failure,
    safe_record,
)

__all__ = [
    "Recorder",
    "Recorders",
    "safe_record",
    "combine_recorders",
    "log_failure",
    "asafe_record",
]
