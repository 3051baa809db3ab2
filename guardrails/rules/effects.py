"""What a pre_turn or post_run rule asks for, beyond its verdict (see ``middleware/_evidence.py``).

The values are defined beside the choke-points that apply them; a rule
imports them from here or from ``guardrails.rules``.
"""

from ..middleware._evidence import Change, Perform, Restrict, Rewrite

__all__ = ["Change", "Perform", "Restrict", "Rewrite"]
