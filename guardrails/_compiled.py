"""The optional compiled core (``guardrails._ccore``), or None.

Built from ``guardrails/_csrc`` when a C compiler is at hand (``setup.py``,
``optional=True``). ``GUARDRAILS_PURE=1`` in the environment when guardrails
is first imported makes every user of the core take its pure-Python path:
``admission.canonical_py`` and ``jsonschema_rs``.
"""

from __future__ import annotations

import os
from types import ModuleType

__all__ = ["CORE", "load"]


def load() -> ModuleType | None:
    """The compiled core whatever ``GUARDRAILS_PURE`` says, or None when it was not built."""
    try:
        from . import _ccore
    except ImportError:
        return None
    return _ccore


CORE = None if os.environ.get("GUARDRAILS_PURE") == "1" else load()
