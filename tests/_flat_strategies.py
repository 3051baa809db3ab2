"""Flat schemas and arguments near their boundaries, for the tests of the compiled flat check.

The check of a flat schema (``test_flat_schema.py``) and the naming of its
offending parameters (``test_flat_offending.py``) draw from the same kinds of
schemas: properties with ``type``, ``enum``, ``const``, bounds and lengths,
``required`` names that may be undeclared, open or closed objects. Each test
picks its own ranges (how far numbers go, which names, how often an object
is closed), so that its examples keep reaching every keyword it counts.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from hypothesis import strategies as st

from guardrails.native._flat_plan import TYPE_BITS

TYPES = sorted(TYPE_BITS)
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-2, 2),
    st.sampled_from([0.0, 1.0, 1.5, 2**70, float(2**70)]),
    st.text("ab\u00e9", max_size=2),
)
"""The values of ``enum``, ``const`` and ``default``: every JSON scalar type, finite."""


def numbers(bound: int, specials: Sequence[int | float]) -> st.SearchStrategy[int | float]:
    """Bounds within ``[-bound, bound]`` (floats to one decimal), and ``specials``."""
    return st.one_of(
        st.integers(-bound, bound),
        st.floats(-bound, bound, allow_nan=False).map(lambda f: round(f, 1)),
        st.sampled_from(list(specials)),
    )


def property_schemas(
    bounds: st.SearchStrategy[int | float],
    longest: int,
    annotations: dict[str, st.SearchStrategy[Any]],
) -> st.SearchStrategy[dict[str, Any]]:
    """A property's schema: any subset of the flat keywords, and ``annotations``
    (keywords the check must ignore)."""
    return st.fixed_dictionaries(
        {},
        optional={
            "type": st.sampled_from(TYPES)
            | st.lists(st.sampled_from(TYPES), min_size=1, max_size=3, unique=True),
            "enum": st.lists(SCALARS, min_size=1, max_size=4),
            "const": SCALARS,
            "minimum": bounds,
            "maximum": bounds,
            "minLength": st.integers(0, longest),
            "maxLength": st.integers(0, longest),
            **annotations,
        },
    )


@st.composite
def flat_schemas(
    draw: Any,
    properties: st.SearchStrategy[dict[str, Any]],
    names: Sequence[str],
    min_size: int,
    closed: Sequence[bool | None],
) -> dict[str, Any]:
    """An object schema of up to four of ``names``; ``required`` may name ``z``,
    which no property declares; ``additionalProperties`` drawn from ``closed``."""
    declared = draw(
        st.dictionaries(st.sampled_from(names), properties, min_size=min_size, max_size=4)
    )
    schema: dict[str, Any] = {"type": "object", "properties": declared}
    required = draw(st.lists(st.sampled_from([*sorted(declared), "z"]), max_size=3, unique=True))
    if required:
        schema["required"] = required
    additional = draw(st.sampled_from(closed))
    if additional is not None:
        schema["additionalProperties"] = additional
    return schema


def near(spec: dict[str, Any], always: Sequence[Any], repeat: int = 1) -> list[Any]:
    """Values of every type and ``always``, then at and around every boundary
    ``spec`` draws (each ``enum`` or ``const`` choice ``repeat`` times)."""
    out: list[Any] = [None, True, False, 0, 1, 1.0, -1, 0.5, "", "a", [], {}, [1], {"k": 1}]
    out += always
    for choice in [*spec.get("enum", []), *([spec["const"]] if "const" in spec else [])]:
        out += [choice] * repeat
        if type(choice) in (int, float) and math.isfinite(choice):
            out += [float(choice), int(choice), choice + 1]
        if type(choice) is bool:
            out.append(int(choice))
    for key in ("minimum", "maximum"):
        if key in spec:
            bound = spec[key]
            out += [bound, bound - 1, bound + 1, float(bound), bound + 0.5, bound - 0.5]
            out += [int(bound), math.nextafter(float(bound), math.inf)]
    for key in ("minLength", "maxLength"):
        if key in spec:
            for n in (spec[key] - 1, spec[key], spec[key] + 1):
                out += ["x" * max(n, 0), "\U0001f600" * max(n, 0), "\u00e9" * max(n, 0)]
    return out
