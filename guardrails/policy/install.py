"""A policy made into guards and one call hook for an engine.

- each ``Param`` is a tool_call guard named after the rule (``policy:pay.iban``),
  applying to its tool, rejecting with the rule's outcome and naming the
  top-level parameter (never the value);
- one pre_turn guard, ``policy:intent``, labels the user's input and takes
  out of the offer every intent-gated tool whose terms the input does not
  mention; a ``policy:<tool>.intent`` tool_call guard refuses a gated tool
  when no user input of the turn mentioned it (or none was seen);
- a ``policy:<tool>.ceiling`` guard (outcome ``limit``) per tool with a ceiling;
- the ``PolicyHook`` counts the calls that reach a ceiling-bound tool (a
  second, atomic check against concurrent calls) and labels every ok result
  with its tool as the source.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from time import perf_counter_ns
from typing import Any

from .._json_depth import deeper_than
from ..context import Escape, GuardResult, Invocation, ToolResult
from ..errors import ConfigurationError
from ..guard import Guard
from ..middleware import _paths
from ..middleware.admission import MAX_DEPTH
from ..middleware.tool_call import Stop
from ..store import offloop
from ..verdicts import ChokePoint, EscapeReason, Outcome, Reason, Verdict
from ._quick import quick_guard
from .defaults import default_guards
from .fields import field_sources, named_by, records_named, values_at
from .gates import CeilingCheck, Counts, IntentCheck, Intents, PreTurnCheck
from .policy import Policy
from .provenance import USER, Ledgers, Sources
from .rules import Check, Param
from .schema_paths import optional_nullable

__all__ = ["Installed", "install"]

_PASS = Verdict.PASS
# A result's JSON read back for labels no deeper than arguments are admitted;
# deeper, it is labelled as text (the parser would recurse once a level).
_LABEL_DEPTH = MAX_DEPTH + 1
_MISSING = _paths.MISSING
_TIMEOUT = Check.TIMEOUT
_clock = perf_counter_ns


class Installed:
    """What ``install`` made: the guards, the hook and the session labels."""

    __slots__ = ("guards", "hook", "intents", "ledgers", "policy")

    def __init__(
        self,
        policy: Policy,
        guards: list[Guard],
        hook: PolicyHook | None,
        ledgers: Ledgers,
        intents: Intents,
    ) -> None:
        self.policy = policy
        self.intents = intents
        self.guards = guards
        self.hook = hook
        self.ledgers = ledgers

    def label_user_input(self, turn: Any, text: str) -> None:
        """Label ``text`` as the user's input of ``turn`` (pre_turn does this itself)."""
        self.intents.seen(turn, text)
        self.ledgers.label_text(turn, turn.context, USER, text, words=True)


def install(
    policy: Policy,
    tools: dict[str, Any],
    *,
    store: Any = None,
    max_values: int = 100_000,
    max_sessions: int = 1_000,
    max_tenants: int = 1_000,
    carry: Installed | None = None,
) -> Installed:
    """Guards and a hook for ``policy``; ``carry``: the policy this one replaces,
    whose session labels (when the sources are the same), per-turn user input
    and in-memory counts go on."""
    limits = {"max_values": max_values, "max_sessions": max_sessions, "max_tenants": max_tenants}
    for name, limit in limits.items():
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise ConfigurationError(f"policy: {name} must be a positive integer, not {limit!r}")
    policy.check(tools)
    fields = field_sources(policy.source_names(), tools)
    sources = Sources(
        tools, policy.trusted, ((tool, f[1]) for tool, items in fields.items() for f in items)
    )
    ledgers = Ledgers(sources, store=store, kinds=policy.kinds.values(), **limits)
    intents = Intents(policy.intents)
    counts = Counts(store, dict(policy.ceilings))
    if carry is not None:
        old = carry.ledgers
        if (
            old.sources.bits == sources.bits
            and old.sources.trusted == sources.trusted
            and old.kinds == ledgers.kinds
        ):
            ledgers = old
        intents.turns = carry.intents.turns
        if carry.hook is not None and carry.hook.counts.store is store:
            counts.memory = carry.hook.counts.memory
    guards: list[Guard] = [
        _param_guard(p, tools[p.tool], ledgers, policy.fail_closed) for p in policy.params
    ]
    guards.extend(default_guards(policy, tools, ledgers))
    if policy.intents or policy.sources_used:
        # Labels the user's input, and applies the intent gates.
        pre_turn = Guard(
            PreTurnCheck(intents, ledgers), name="policy:intent", at=ChokePoint.PRE_TURN
        )
        guards.append(pre_turn)
    guards.extend(_gate_guards(policy, intents, counts))
    hook = None
    if policy.ceilings or policy.sources_used:
        hook = PolicyHook(ledgers, counts, intents, label=policy.sources_used, fields=fields)
    return Installed(policy, guards, hook, ledgers, intents)


def _gate_guards(policy: Policy, intents: Intents, counts: Counts) -> list[Guard]:
    """A guard per tool with an intent gate (unavailable) or a ceiling (limit)."""
    guards: list[Guard] = []
    for tool in sorted(policy.intents):
        guards.append(
            Guard(
                IntentCheck(tool, intents),
                name=f"policy:{tool}.intent",
                outcome=Outcome.UNAVAILABLE,
                tools=[tool],
                fail_closed=True,
            )
        )
    for tool, ceiling in sorted(policy.ceilings.items()):
        guards.append(
            Guard(
                CeilingCheck(tool, ceiling, counts),
                name=f"policy:{tool}.ceiling",
                outcome=Outcome.LIMIT,
                tools=[tool],
                fail_closed=True,
            )
        )
    return guards


# -- parameter rules ------------------------------------------------------------


def _param_guard(rule: Param, tool: Any, ledgers: Ledgers, fail_closed: bool) -> Guard:
    whole = _ParamCheck(rule, ledgers, optional_nullable(tool, rule.path))
    return Guard(
        _simple(whole) if whole.simple and not whole.provenance else whole,
        name=rule.rule_name,
        outcome=rule.outcome,
        tools=[rule.tool],
        fail_closed=fail_closed,
    )


def _simple(whole: _ParamCheck) -> Any:
    """The guard function of a rule on a top-level parameter, without provenance:
    a plain function over locals (the common case, on every call's path). A value
    that the rule's shortcut passes is a pass; anything else is ``check``'s to decide,
    under the rule's deadline."""
    check, head, rejected = whole.check, whole.head, whole._rejected
    deadline, skip_null = whole.deadline_ns, whole.skip_null

    def decide(value: Any, context: Any) -> Verdict | GuardResult:
        if value is None and skip_null:
            return _PASS  # null where the schema allows it and need not have it: absent
        start = _clock()
        failed = check(value, context, None)
        if _clock() - start > deadline:
            failed.append(_TIMEOUT)  # a late answer is never a pass
        return rejected(set(failed)) if failed else _PASS

    quick_rule = quick_guard(whole.rule._compiled, head, decide)
    if quick_rule is not None:
        quick_rule.__name__ = whole.__name__
        return quick_rule

    def rule(inv: Invocation) -> Verdict | GuardResult:
        value = inv.arguments.get(head, _MISSING)
        if value is _MISSING:
            return _PASS  # absent: the schema decides whether it may be
        return decide(value, inv.context)

    rule.__name__ = whole.__name__
    return rule


class _ParamCheck:
    """The guard function of one ``Param``."""

    __slots__ = (
        "__name__",
        "check",
        "deadline_ns",
        "head",
        "ledgers",
        "path",
        "provenance",
        "reads_store",
        "rule",
        "simple",
        "skip_null",
    )

    def __init__(self, rule: Param, ledgers: Ledgers, skip_null: bool = False) -> None:
        self.__name__ = rule.rule_name
        self.rule = rule
        self.check = rule._compiled.check
        self.ledgers = ledgers
        self.path = _paths.parse(rule.path)
        self.simple = len(self.path) == 1 and isinstance(self.path[0], str)
        self.head = rule.path.split(".")[0]
        self.provenance = (
            rule.grounded_in is not None or rule.not_only_untrusted or rule.template is not None
        )
        self.deadline_ns = int(rule.timeout * 1e9)  # type: ignore[operator]
        # An optional parameter whose schema admits null: an explicit null is as if absent.
        self.skip_null = skip_null
        # Provenance reads the session's labels from the store: off the loop under acall.
        self.reads_store = ledgers.store if self.provenance else None

    def __call__(self, inv: Invocation) -> Verdict | GuardResult:
        start = _clock()
        skip_null = self.skip_null
        if self.simple:
            value = inv.arguments.get(self.head, _MISSING)
            if value is _MISSING or (value is None and skip_null):
                return _PASS  # absent (or a null that stands for absent): the schema decides
            seen = (
                self.ledgers.view(inv.turn, inv.context, inv.call_id) if self.provenance else None
            )
            found = set(self.check(value, inv.context, seen))
        else:
            seen = (
                self.ledgers.view(inv.turn, inv.context, inv.call_id) if self.provenance else None
            )
            found = set()
            for _, value in _paths.walk(inv.arguments, self.path):
                if value is None and skip_null:
                    continue
                found.update(self.check(value, inv.context, seen))
        if _clock() - start > self.deadline_ns:
            found.add(_TIMEOUT)  # a late answer is never a pass
        return self._rejected(found) if found else _PASS

    def _rejected(self, failed: set[Check]) -> GuardResult:
        evidence = {"rule": self.rule.rule_name, "param": self.rule.path}
        if _TIMEOUT in failed:
            # Past its deadline a rule decides nothing: a fault that refuses the call,
            # counted as a ``timeout`` escape, whatever the policy's ``fail_closed``.
            return GuardResult.rejected(
                _TIMEOUT.value,
                evidence={**evidence, "checks": sorted(c.value for c in failed)},
                params=(self.head,),
                escape=EscapeReason.TIMEOUT,
            )
        checks = sorted(c.value for c in failed)
        # Refused only because a bound of the session's record was reached: the
        # rule could not decide and refused, a fault (never an escape, never a pass).
        fault = EscapeReason.NOT_CONFIGURED if failed == {Check.UNKNOWN} else None
        return GuardResult.rejected(
            checks[0], evidence={**evidence, "checks": checks}, params=(self.head,), escape=fault
        )


# -- the hook ----------------------------------------------------------------------------


class PolicyHook:
    """Step 6: count calls for ceilings (atomically); after a call: label its result."""

    __slots__ = ("counts", "fields", "intents", "label", "ledgers", "name")

    def __init__(
        self,
        ledgers: Ledgers,
        counts: Counts,
        intents: Intents,
        *,
        label: bool,
        fields: Mapping[str, tuple[tuple[Any, str, Any], ...]] | None = None,
    ) -> None:
        self.name = "policy"
        self.fields = dict(fields or {})  # tool -> (path, field source, by paths)
        self.ledgers = ledgers
        self.counts = counts
        self.intents = intents
        self.label = label

    def before(self, invocation: Invocation, /) -> Any:
        if invocation.name not in self.counts.ceilings:
            return None
        try:
            if self.counts.exceeded(invocation, 1):
                return Stop(Outcome.LIMIT, Reason.CEILING)
        except LookupError:
            return Stop(Outcome.LIMIT, Reason.CEILING)
        except Exception as exc:
            return Escape(self.name, ChokePoint.TOOL_CALL, EscapeReason.STORE_UNAVAILABLE, exc)
        return None

    def after(self, invocation: Invocation, result: ToolResult, /) -> ToolResult:
        if self.label and result.outcome is Outcome.OK and result.content:
            self._label(invocation, result)
        return result

    # Under acall, what touches the store runs on its threads, never on the loop.

    async def abefore(self, invocation: Invocation, /) -> Any:
        store = self.counts.store
        if store is None or invocation.name not in self.counts.ceilings:
            return self.before(invocation)
        return await offloop.run(store, self.before, invocation)

    async def aafter(self, invocation: Invocation, result: ToolResult, /) -> ToolResult:
        store = self.ledgers.store
        if store is None or not self.label:
            return self.after(invocation, result)
        return await offloop.run(store, self.after, invocation, result)

    def _label(self, invocation: Invocation, result: ToolResult) -> None:
        """Label what the model was shown: the text, or the JSON it holds read back
        (plain values only, whatever object the tool returned)."""
        turn, context, source = invocation.turn, invocation.context, invocation.name
        content = result.content
        if (
            result.value.__class__ is not str
            and not result.truncated
            and content[:1] in "[{"
            and not deeper_than(content, _LABEL_DEPTH)  # the parser recurses once a level
        ):
            try:
                shown = json.loads(content)
            except ValueError:
                pass
            else:
                self.ledgers.label_value(turn, context, source, shown)
                self._label_fields(turn, context, source, shown)
                return
        self.ledgers.label_text(turn, context, source, content)

    def _label_fields(self, turn: Any, context: Any, source: str, shown: Any) -> None:
        """Label the values at each field source's path; ``by``: of the records the user named."""
        named = None
        for path, field, by in self.fields.get(source, ()):
            if not by:
                values = values_at(shown, path)
            else:
                named = named or self._user_named(turn, context)
                values = records_named(shown, path, by, named)
            for value in values:
                self.ledgers.label_value(turn, context, field, value)

    def _user_named(self, turn: Any, context: Any) -> Callable[[Any], bool]:
        view, user = self.ledgers.view(turn, context), self.ledgers.sources.bits[USER]
        return named_by(lambda text: bool(view.lookup(text) & user))
