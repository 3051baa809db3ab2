"""How many examples a property test tries: CI's count in CI, a fifth of it locally.

The root ``conftest.py`` loads the ``ci`` profile when ``CI=true`` (``.ci/run`` sets
it) and the ``local`` profile otherwise; ``HYPOTHESIS_PROFILE`` names one outright.
A test that sets its own count writes ``@settings(max_examples=examples(400))``:
400 in CI, 80 locally (``tests/test_ci_passes.py`` checks no literal count is left).
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

SHARE = 5  # a local run tries one example in SHARE
CI_EXAMPLES = 100  # what CI's run has always tried by default

settings.register_profile(
    "ci", max_examples=CI_EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile("local", settings.get_profile("ci"), max_examples=CI_EXAMPLES // SHARE)

IN_CI = os.environ.get("CI", "").strip().lower() in {"1", "true", "yes"}
PROFILE = os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if IN_CI else "local")


def load_profile() -> None:
    settings.load_profile(PROFILE)


def examples(ci: int) -> int:
    """``ci`` examples under the ``ci`` profile (or any other but ``local``); a fifth locally."""
    return ci if PROFILE != "local" else max(1, ci // SHARE)
