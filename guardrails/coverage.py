"""Guard coverage from a Prometheus exposition or the audit log: ``guardrails coverage``: ``guardrails.observe.coverage``, at the path it had before."""

from .observe.coverage import (
    CoverageError,
    CoverageReport,
    GuardCoverage,
    add_arguments,
    from_audit,
    from_exposition,
    load,
    load_audit,
    main,
    read_source,
)

__all__ = [
    "CoverageError",
    "CoverageReport",
    "GuardCoverage",
    "add_arguments",
    "from_audit",
    "from_exposition",
    "load",
    "load_audit",
    "main",
    "read_source",
]
