"""Observability: recorders, Prometheus metrics, OpenTelemetry spans, coverage (see ``AGENTS.md``)."""
