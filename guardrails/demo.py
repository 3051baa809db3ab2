"""``guardrails demo``, at the path it had before: ``guardrails.cli.demo`` holds it."""

import sys

from .cli.demo import SCENES, Bank, Scene, build, main, run

__all__ = ["SCENES", "Bank", "Scene", "build", "main", "run"]

if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
