"""The compiled core's Python side: loading it, and what it is handed (see ``AGENTS.md``)."""
