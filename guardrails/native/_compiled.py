"""The optional compiled core (``guardrails._ccore``), or None.

Built from ``guardrails/native/_csrc`` when a C compiler is at hand (``setup.py``,
``optional=True``). ``GUARDRAILS_PURE=1`` in the environment when guardrails
is first imported makes every user of the core take its pure-Python path:
``admission.canonical_py``, ``jsonschema_rs``, ``store._chain.sealed_py``, ...
"""

from __future__ import annotations

import os
import warnings
from types import ModuleType

__all__ = ["CORE", "FUNCTIONS", "load"]

# What this version of the package calls in the core. A build left over from
# another version (an editable install not rebuilt after an update) lacks some.
FUNCTIONS = (
    "canonical",
    "configure",
    "flat_valid",
    "flat_offending",
    "json_text",
    "render",
    "configure_render",
    "word_table",
    "scan_words",
    "chain_link",
    "chain_text",
    "sqlite_params",
    "make",
    "replaced",
    "configure_chain",
)


def load() -> ModuleType | None:
    """The compiled core whatever ``GUARDRAILS_PURE`` says, or None when it was not
    built, or was built from another version of the sources (with a warning)."""
    try:
        from .. import _ccore
    except ImportError:
        return None
    missing = [name for name in FUNCTIONS if not hasattr(_ccore, name)]
    if missing:
        warnings.warn(
            f"guardrails._ccore was built from other sources (no {', '.join(missing)}): "
            "running the pure-Python path; rebuild it with `pip install -e .`",
            RuntimeWarning,
            stacklevel=2,
        )
        return None
    return _ccore


CORE = None if os.environ.get("GUARDRAILS_PURE") == "1" else load()
