"""Admission: tool_call steps 1-4, from what the model sent to one canonical value.

What the model sent becomes exactly one JSON value (I-JSON, RFC 7493): a
``dict`` with exact-``str`` keys, ``list``, exact ``str`` without lone
surrogates, ``int`` within the finite range of a double, finite ``float``,
``bool``, ``None``. JSON text is parsed
strictly: ``NaN``/``Infinity`` tokens and duplicate keys are refused. Anything
else is ``invalid_args`` (``not_json``). Types are checked with ``type(x) is``
before anything is touched, and dict and list subclasses are read through
``dict.items`` / ``list.__iter__``: no user-defined ``__len__``, ``__hash__``,
``__eq__``, ``__str__`` or ``__iter__`` runs here.

The walk builds two things: the canonical copy that the tool receives, and
(only for nested values) the read-only view that guards see. It is written
twice, with the same rules checked in the same order: ``_csrc/canonical.c``
(the optional compiled core, ``guardrails.native._compiled``) and the pure walk
below, which runs when the core was not built or ``GUARDRAILS_PURE=1``.
``COMPILED`` says which one ``canonical`` is.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from time import perf_counter_ns
from types import MappingProxyType
from typing import Any

from .._json_depth import deeper_than
from ..context import Escape, ToolResult, VerdictRecord
from ..guard import Guard, plain_steps
from ..native._compiled import CORE, load
from ..tools import Tool
from ..verdicts import ChokePoint, EscapeReason, Outcome, Reason, Verdict, model_sentence
from ._frozen import FrozenDict, FrozenList

__all__ = [
    "COMPILED",
    "INT_BOUND",
    "MAX_CALL_ID",
    "MAX_DEPTH",
    "Plan",
    "admit",
    "canonical",
    "canonical_py",
    "bound_copy",
    "bound_view",
    "entry_call_id",
    "load_compiled",
    "refusal",
]

MAX_DEPTH = 128
MAX_CALL_ID = 128
# The least integer that rounds to infinity as a double (``float`` raises
# OverflowError from here on): an integer outside (-INT_BOUND, INT_BOUND) is
# not a finite number, and is refused as NaN and the infinities are.
INT_BOUND = 2**1024 - 2**970
FLAG_BOUND_ARGUMENT_SUPPLIED = "bound_argument_supplied"

_INVALID_ARGS = Outcome.INVALID_ARGS
_UNAVAILABLE = Outcome.UNAVAILABLE
_REJECT = Verdict.REJECT
_Proxy = MappingProxyType
_SURROGATE = re.compile("[\ud800-\udfff]")


class Plan:
    """Everything the pipeline needs about one tool, computed at registration: the
    tool (its compiled schema, bound parameters and ``extra`` check) and its guards."""

    __slots__ = ("awaits", "guards", "output_guards", "plain", "steps", "tool")

    def __init__(
        self,
        tool: Tool,
        guards: tuple[Guard, ...],
        output_guards: tuple[Guard, ...],
        awaits: bool = False,
    ) -> None:
        self.tool = tool
        self.guards = guards
        self.output_guards = output_guards
        # True when a guard is async: only then can a guard swallow the caller's
        # cancellation, and the async driver checks for it before the tool runs.
        self.awaits = awaits
        # Every guard sync, without timeout or observe mode: one loop runs them
        # all, in either driver (``evaluate_plain``).
        self.plain = bool(guards) and all(g.plain for g in guards)
        self.steps = plain_steps(guards) if self.plain else ()


class _Refused(Exception):
    """Raised inside the walk: the value is refused for ``reason``."""

    def __init__(self, reason: Reason) -> None:
        self.reason = reason


# -- the canonical value --------------------------------------------------------


def canonical_py(arguments: Any, limit: int) -> tuple[dict[str, Any], Any] | Reason:
    """``(value for the tool, view for guards)`` or the reason it is refused.

    The view is ``None`` when the value is flat (no nested object or array):
    a read-only proxy of the value itself is then a read-only view at every
    depth. ``limit`` bounds the size (characters of text, plus one per scalar
    and container); depth is bounded by ``MAX_DEPTH``.
    """
    cls = type(arguments)
    if cls is str or cls is bytes or cls is bytearray:
        parsed = _parse(arguments, limit)
        if parsed.__class__ is Reason:
            return parsed
        arguments = parsed
    elif not issubclass(cls, dict):
        return Reason.NOT_AN_OBJECT
    try:
        value, nested, _ = _object(arguments, 0, limit)
    except _Refused as refused:
        return refused.reason
    except Exception:  # a dict changed by another thread while it was read
        return Reason.NOT_AN_OBJECT
    if nested is None:
        return value, None
    view = dict(value)
    view.update(nested)
    return value, _Proxy(view)


def _object(node: Any, depth: int, budget: int) -> tuple[dict[str, Any], Any, int]:
    """A dict's canonical copy, its nested frozen members (or None), the budget left."""
    out: dict[str, Any] = {}
    frozen: dict[str, Any] | None = None
    budget -= dict.__len__(node) + 1
    for key, value in dict.items(node):
        if type(key) is not str:
            raise _Refused(Reason.NOT_JSON)
        budget -= len(key)
        if budget < 0:
            raise _Refused(Reason.TOO_LARGE)
        if not (key.isascii() or _SURROGATE.search(key) is None):
            raise _Refused(Reason.NOT_JSON)
        cls = type(value)
        if cls is str:
            budget -= len(value)
            if budget < 0:
                raise _Refused(Reason.TOO_LARGE)
            if not (value.isascii() or _SURROGATE.search(value) is None):
                raise _Refused(Reason.NOT_JSON)
        elif cls is int:
            if not -INT_BOUND < value < INT_BOUND:
                raise _Refused(Reason.NOT_JSON)
            budget -= 1
        elif cls is bool or value is None:
            budget -= 1
        elif cls is float:
            if value - value != 0.0:  # NaN and the infinities
                raise _Refused(Reason.NOT_JSON)
            budget -= 1
        else:
            value, view, budget = _container(value, depth + 1, budget)
            if frozen is None:
                frozen = {}
            frozen[key] = view
        if budget < 0:
            raise _Refused(Reason.TOO_LARGE)
        out[key] = value
    return out, frozen, budget


def _container(node: Any, depth: int, budget: int) -> tuple[Any, Any, int]:
    """(canonical copy, frozen view, budget left) of a nested dict or list."""
    if depth > MAX_DEPTH:
        raise _Refused(Reason.TOO_LARGE)
    cls = type(node)
    if issubclass(cls, dict):
        value, nested, budget = _object(node, depth, budget)
        view = FrozenDict(value)
        if nested is not None:
            dict.update(view, nested)
        return value, view, budget
    if not issubclass(cls, list):
        raise _Refused(Reason.NOT_JSON)
    budget -= list.__len__(node) + 1
    if budget < 0:
        raise _Refused(Reason.TOO_LARGE)
    out: list[Any] = []
    views: list[Any] = []
    for item in list.__iter__(node):
        cls = type(item)
        if cls is str:
            budget -= len(item)
            if budget < 0:
                raise _Refused(Reason.TOO_LARGE)
            if not (item.isascii() or _SURROGATE.search(item) is None):
                raise _Refused(Reason.NOT_JSON)
            view = item
        elif cls is int:
            if not -INT_BOUND < item < INT_BOUND:
                raise _Refused(Reason.NOT_JSON)
            view = item
        elif cls is bool or item is None:
            view = item
        elif cls is float:
            if item - item != 0.0:
                raise _Refused(Reason.NOT_JSON)
            view = item
        else:
            item, view, budget = _container(item, depth + 1, budget)
        out.append(item)
        views.append(view)
    return out, FrozenList(views), budget


def _no_constants(token: str) -> Any:
    raise _Refused(Reason.NOT_JSON)


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        raise _Refused(Reason.NOT_JSON)  # a duplicate key: I-JSON refuses it
    return out


_DECODE = json.JSONDecoder(parse_constant=_no_constants, object_pairs_hook=_unique).decode


def _parse(text: str | bytes | bytearray, limit: int) -> Any:
    """JSON text of an object, parsed strictly; checked for size and depth before it
    is parsed (the parser recurses once per level: see ``_json_depth``)."""
    if len(text) > limit:
        return Reason.TOO_LARGE
    if not text:
        return {}
    try:
        if not isinstance(text, str):
            text = text.decode(json.detect_encoding(text), "surrogatepass")  # as json.loads
        if deeper_than(text, MAX_DEPTH + 1):  # the object itself, then MAX_DEPTH levels
            return Reason.TOO_LARGE
        parsed = _DECODE(text)
    except _Refused as refused:
        return refused.reason
    except (ValueError, RecursionError) as exc:
        # A plain ValueError is the interpreter's limit on an integer's digits:
        # a number far outside a double's range, refused as a dict's would be.
        return Reason.NOT_JSON if type(exc) is ValueError else Reason.NOT_AN_OBJECT
    return parsed if type(parsed) is dict else Reason.NOT_AN_OBJECT


def load_compiled() -> Callable[[Any, int], tuple[dict[str, Any], Any] | Reason] | None:
    """The compiled ``canonical``, configured, or None when it was not built."""
    core = load()
    if core is None:
        return None
    core.configure(
        Reason.NOT_JSON,
        Reason.TOO_LARGE,
        Reason.NOT_AN_OBJECT,
        FrozenDict,
        FrozenList,
        _Proxy,
        _parse,
        MAX_DEPTH,
    )
    canonical: Callable[[Any, int], tuple[dict[str, Any], Any] | Reason] = core.canonical
    return canonical


_COMPILED_CANONICAL = load_compiled() if CORE is not None else None
COMPILED = _COMPILED_CANONICAL is not None
canonical = _COMPILED_CANONICAL or canonical_py


# -- the call id ------------------------------------------------------------------


def entry_call_id(call_id: Any, new: Callable[[], str]) -> str:
    """The call id every row, metric and span of this call carries.

    A model-supplied id is kept when it is printable text of 1-128
    characters. Longer or unprintable ids (lone surrogates, NUL, control
    characters) are escaped and cut to 128 characters, deterministically.
    ``None``, ``""`` and anything that is not exactly a ``str`` get a new id.
    """
    if type(call_id) is not str or not call_id:
        return new()
    if len(call_id) <= MAX_CALL_ID and call_id.isprintable():
        return call_id
    head = call_id[:MAX_CALL_ID]
    escaped = "".join(c if c.isprintable() else ascii(c)[1:-1] for c in head)
    return escaped[:MAX_CALL_ID]


# -- steps 1-4 ----------------------------------------------------------------------


def admit(
    plans: Any, turn: Any, name: Any, arguments: Any, call_id: str, limit: int, start: int
) -> ToolResult | tuple[Plan, dict[str, Any], Any]:
    """Steps 1-4: the plan, the canonical arguments and the guards' view (``None``
    when the arguments are flat), or a refusal."""
    plan: Plan | None = plans.get(name) if type(name) is str else None
    if plan is None:
        return refusal(
            call_id, _safe_name(name), _UNAVAILABLE, Reason.UNKNOWN_TOOL, start, known=False
        )
    offered = turn.offered
    if offered is not None and name not in offered:
        gated = getattr(turn, "gated", None)
        verdicts = gated.get(name, ()) if gated else ()
        return refusal(call_id, name, _UNAVAILABLE, Reason.NOT_OFFERED, start, verdicts=verdicts)
    admitted = canonical(arguments, limit)
    if isinstance(admitted, Reason):
        return refusal(call_id, name, _INVALID_ARGS, admitted, start)
    args, view = admitted
    tool = plan.tool
    bound = tool.bound
    if bound and not bound.isdisjoint(args):
        return refusal(
            call_id,
            name,
            _INVALID_ARGS,
            Reason.BOUND_ARGUMENT_SUPPLIED,
            start,
            flags=(FLAG_BOUND_ARGUMENT_SUPPLIED,),
        )
    compiled = tool.compiled
    extra = False
    # ``extra_check`` is None when the schema itself refuses undeclared keys.
    if tool.extra_check is not None and not compiled.properties.issuperset(args):
        if tool.extra_check == "drop":
            args = {k: v for k, v in args.items() if k in compiled.properties}
            if view is not None:
                view = _Proxy({k: v for k, v in view.items() if k in compiled.properties})
        else:
            extra = True
    if extra or not compiled.check(args):
        return _schema_refusal(plan, args, extra, call_id, name, start)
    return plan, args, view


def _schema_refusal(
    plan: Plan, args: dict[str, Any], extra: bool, call_id: str, name: str, start: int
) -> ToolResult:
    compiled = plan.tool.compiled
    try:
        names, undeclared = compiled.offending(args)
    except ValueError:  # the validator's own depth limit
        names, undeclared = (), False
    undeclared = undeclared or extra
    if not args.keys() >= compiled.required_set:
        reason = Reason.MISSING_REQUIRED
    elif names or not undeclared:
        reason = Reason.SCHEMA
    else:
        reason = Reason.UNDECLARED_PARAMETER
    return refusal(call_id, name, _INVALID_ARGS, reason, start, params=names, undeclared=undeclared)


# -- bound values: the turn's closure and the secret provider ------------------------


def resolve(
    tool: Tool, args: dict[str, Any], context: Any, provider: Callable[[str], Any] | None
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """The arguments merged with the bound values, and the secrets. Runs user code."""
    merged = dict(args)
    for param, source in tool.bind.items():
        value = source(context) if callable(source) else context.get(source)
        if value is None:
            raise LookupError(param)
        merged[param] = bound_copy(value)
    secrets = None
    if tool.secrets:
        if provider is None:
            raise LookupError("no secret provider")
        secrets = {}
        for param, secret in tool.secrets.items():
            value = provider(secret.name)
            if value is None:
                raise LookupError(param)
            secrets[param] = value
    return merged, secrets


# A bound value is the application's, not the model's: its size is not the
# model's to fill, so the walk's budget does not bound it (its depth still does).
_BOUND_BUDGET = 2**62


def bound_copy(value: Any) -> Any:
    """The tool's own canonical copy of a bound JSON array or object, so that neither
    a hook nor the tool changes what the context holds or what a guard read; any
    other value (a scalar, an object that is not JSON) as the context holds it."""
    cls = type(value)
    if not (issubclass(cls, dict) or issubclass(cls, list)):
        return value
    try:
        return _container(value, 1, _BOUND_BUDGET)[0]
    except Exception:  # not JSON, deeper than MAX_DEPTH, or changed while read
        return value


def bound_view(value: Any) -> Any:
    """The guards' read-only view of a bound value made by ``bound_copy``."""
    cls = type(value)
    if cls is not dict and cls is not list:
        return value
    try:
        return _container(value, 1, _BOUND_BUDGET)[1]
    except Exception:  # not a JSON value: shown as the context holds it
        return value


def unresolved(
    call_id: str, name: str, start: int, exc: BaseException | None, late: bool = False
) -> ToolResult:
    """``unavailable``: a bound value or secret could not be had; the escape is counted."""
    if late or isinstance(exc, TimeoutError):
        why = EscapeReason.TIMEOUT
    elif isinstance(exc, LookupError):
        why = EscapeReason.NOT_CONFIGURED
    else:
        why = EscapeReason.RAISED
    result = refusal(call_id, name, _UNAVAILABLE, Reason.BINDING_UNRESOLVED, start, exception=exc)
    return result._replace(escapes=(Escape("binding", ChokePoint.TOOL_CALL, why, exc),))


# -- refusals ------------------------------------------------------------------------


def refusal(
    call_id: str,
    name: str,
    outcome: Outcome,
    reason: Reason,
    start: int,
    *,
    params: tuple[str, ...] = (),
    flags: tuple[str, ...] = (),
    known: bool = True,
    exception: BaseException | None = None,
    undeclared: bool = False,
    verdicts: tuple[VerdictRecord, ...] = (),
) -> ToolResult:
    """A built-in check refused the call: its verdict is reject though no guard ran
    (``verdicts``: the gate that withheld the tool at pre_turn, if one says so)."""
    return ToolResult(
        call_id,
        name,
        outcome,
        model_sentence(outcome, params, undeclared=undeclared),
        _REJECT,
        verdicts,
        (),
        reason,
        params,
        None,
        exception,
        perf_counter_ns() - start,
        False,
        flags,
        known,
    )


def _safe_name(name: Any) -> str:
    # An invented name is kept for the audit trail only, bounded, and built
    # without calling anything the object defines.
    if isinstance(name, str):
        return str.__getitem__(name, slice(0, 200))  # an exact str, even from a subclass
    return "<not a string>"
