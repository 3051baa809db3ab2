"""``python -m guardrails.cli``: the ``guardrails`` command."""

from __future__ import annotations

import sys

from . import main

sys.exit(main())
