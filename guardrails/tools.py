"""Tool definitions: one model, built from a Python function or an existing definition.

``@tool`` derives the input schema from the function's signature with pydantic.
``Tool.from_definition`` takes an Anthropic, OpenAI or MCP definition plus an
implementation. Either way the schema is checked and compiled once, here, and
bound parameters (values that come from the turn's context, never from the
model) are removed from what the model sees.
"""

from __future__ import annotations

import inspect
import re
import types
import typing
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, Union, overload

import pydantic

from ._conditions import ApprovalRule, parse_approval
from .context import TurnContext
from .errors import ConfigurationError, SchemaError
from .guard import Guard, _is_async, as_guard
from .schema import CompiledSchema, without_params

__all__ = ["Binding", "Extra", "Secret", "Tool", "tool"]

_NAME = re.compile(r"^[A-Za-z0-9_.\-]{1,128}$")


@dataclass(frozen=True, slots=True)
class Secret:
    """A bound value read from the engine's secret provider by ``name``.

    Secrets are bound only into tools declared as actions (``effect=True``),
    are never shown to guards, and never appear in schemas, results or records.
    """

    name: str


# What a tool does with arguments its schema does not declare: refuse the call
# (``invalid_args``, reason ``undeclared_parameter``), drop them before
# validation, or leave them to the schema and the implementation.
Extra = Literal["reject", "drop", "allow"]
EXTRA_MODES = frozenset({"reject", "drop", "allow"})

# Where a bound parameter's value comes from: a key of the TurnContext
# (``tenant``, ``session`` ... or a key of ``values``), a function of the
# context, or a Secret.
Binding = str | Callable[[TurnContext], Any] | Secret


class Tool:
    """A tool: name, description, input schema, implementation, bindings, options.

    Calling a ``Tool`` calls the implementation directly, unguarded.
    """

    __slots__ = (
        "__wrapped__",
        "approval",
        "bind",
        "bound",
        "compiled",
        "convert",
        "deadline_ns",
        "description",
        "effect",
        "extra",
        "extra_check",
        "fn",
        "guards",
        "is_async",
        "name",
        "options",
        "output_guards",
        "plain",
        "runs_providers",
        "schema",
        "secrets",
        "source_schema",
        "timeout",
    )

    def __init__(
        self,
        name: str,
        fn: Callable[..., Any],
        schema: Mapping[str, Any],
        *,
        description: str = "",
        bind: Mapping[str, Binding] | None = None,
        effect: bool = False,
        timeout: float | None = None,
        guards: Iterable[Guard | Callable[[Any], Any]] = (),
        output_guards: Iterable[Guard | Callable[[Any], Any]] = (),
        options: Mapping[str, Any] | None = None,
        convert: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
        extra: Extra | None = None,
        approval: str | ApprovalRule | None = None,
    ) -> None:
        extra = _checked_settings(name, fn, timeout, extra)
        bind = dict(bind or {})
        props = schema.get("properties", {}) if isinstance(schema, Mapping) else {}
        _check_bindings(name, bind, props, effect)
        # When a call needs a person's approval (docs/approvals.md): parsed here, so a
        # misspelled setting or a parameter the tool lacks fails at registration.
        self.approval = parse_approval(approval, f"tool {name!r}")
        if self.approval is not None:
            self.approval.check_names(props, f"tool {name!r}")
        self.name = name
        self.description = description
        self.fn = fn
        self.__wrapped__ = fn
        self.is_async = _is_async(fn)
        self.source_schema = dict(schema)
        self.schema = without_params(schema, frozenset(bind))
        self.compiled = CompiledSchema(self.schema, name)
        self.secrets = {p: s for p, s in bind.items() if isinstance(s, Secret)}
        self.bind = {p: s for p, s in bind.items() if not isinstance(s, Secret)}
        # Every parameter the model must not supply.
        self.bound: frozenset[str] = frozenset(bind)
        self.effect = effect
        self.timeout = timeout
        self.deadline_ns = None if timeout is None else int(timeout * 1e9)
        # What to do with arguments the schema does not declare (see docs/tools.md).
        self.extra: Extra = extra
        # What admission checks itself: nothing when undeclared keys are allowed,
        # or refused by a closed schema already (the reason is the same).
        self.extra_check: str | None = (
            None if extra == "allow" or (extra == "reject" and self.compiled.closed) else extra
        )
        # Bindings that call user code (functions of the context, the secret
        # provider) run under the engine's provider deadline.
        self.runs_providers = bool(self.secrets) or any(
            not isinstance(s, str) for s in self.bind.values()
        )
        self.guards = tuple(as_guard(g) for g in guards)
        self.output_guards = tuple(as_guard(g) for g in output_guards)
        self.options: Mapping[str, Any] = types.MappingProxyType(dict(options or {}))
        self.convert = convert
        # Called inline with the validated arguments as they are: no conversion,
        # no secrets, no timeout, not async.
        self.plain = not self.is_async and timeout is None and convert is None and not self.secrets

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<Tool {self.name!r}>"

    # -- export, with the bound parameters removed --------------------------

    def to_anthropic(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": self.description,
            "input_schema": _copy(self.schema),
        }

    def to_openai(self) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": _copy(self.schema),
            },
        }

    def to_mcp(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": self.description,
            "inputSchema": _copy(self.schema),
        }

    # -- import -------------------------------------------------------------

    @classmethod
    def from_definition(cls, definition: Any, fn: Callable[..., Any], **options: Any) -> Tool:
        """A tool from an Anthropic, OpenAI (bare or wrapped) or MCP definition."""
        if hasattr(definition, "model_dump"):
            definition = definition.model_dump(by_alias=True, exclude_none=True)
        if not isinstance(definition, Mapping):
            raise SchemaError(f"tool definition {definition!r}: not a mapping")
        if definition.get("type") == "function" and isinstance(definition.get("function"), Mapping):
            definition = definition["function"]
        for key in ("input_schema", "inputSchema", "parameters"):
            if key in definition:
                schema = definition[key]
                break
        else:
            schema = {"type": "object", "properties": {}}
        name = definition.get("name")
        if not isinstance(name, str):
            raise SchemaError(f"tool definition without a name: {sorted(definition)!r}")
        if not isinstance(schema, Mapping):
            raise SchemaError(f"tool {name!r}: the input schema must be an object")
        options.setdefault("description", definition.get("description") or "")
        return cls(name, fn, schema, **options)

    from_anthropic = from_definition
    from_openai = from_definition
    from_mcp = from_definition


def _checked_settings(
    name: str, fn: Callable[..., Any], timeout: float | None, extra: Extra | None
) -> Extra:
    """The name, implementation and timeout checked; ``extra``, defaulted from ``fn``."""
    if not isinstance(name, str) or not _NAME.match(name):
        raise ConfigurationError(f"tool name {name!r}: use 1-128 letters, digits, '_', '-' or '.'")
    if not callable(fn):
        raise ConfigurationError(f"tool {name!r}: the implementation is not callable")
    if timeout is not None and not timeout > 0:
        raise ConfigurationError(f"tool {name!r}: timeout must be positive")
    if extra is None:
        return "allow" if _takes_kwargs(fn) else "reject"
    if extra not in EXTRA_MODES:
        raise ConfigurationError(
            f"tool {name!r}: extra must be 'reject', 'drop' or 'allow', not {extra!r}"
        )
    return extra


def _check_bindings(
    name: str, bind: Mapping[str, Any], props: Mapping[str, Any], effect: bool
) -> None:
    """Each bound parameter is in the schema, bound to a context key, a function of the
    context or a Secret, and a Secret only into an action."""
    for param, source in bind.items():
        if param not in props:
            raise ConfigurationError(
                f"tool {name!r}: bound parameter {param!r} is not in its schema"
            )
        if not (isinstance(source, str | Secret) or callable(source)):
            raise ConfigurationError(
                f"tool {name!r}: binding of {param!r} must be a context key, "
                "a function of the context, or a Secret"
            )
        if isinstance(source, Secret) and not effect:
            raise ConfigurationError(
                f"tool {name!r}: secret {source.name!r} can only be bound into a tool "
                "declared as an action (effect=True)"
            )


def _takes_kwargs(fn: Callable[..., Any]) -> bool:
    """True when ``fn`` accepts ``**kwargs`` (undeclared arguments are then allowed)."""
    try:
        parameters = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(p.kind is p.VAR_KEYWORD for p in parameters)


def _copy(schema: dict[str, Any]) -> dict[str, Any]:
    import copy

    return copy.deepcopy(schema)


@overload
def tool(fn: Callable[..., Any], /) -> Tool: ...
@overload
def tool(
    fn: None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    bind: Mapping[str, Binding] | None = None,
    effect: bool = False,
    timeout: float | None = None,
    guards: Iterable[Guard | Callable[[Any], Any]] = (),
    output_guards: Iterable[Guard | Callable[[Any], Any]] = (),
    options: Mapping[str, Any] | None = None,
    extra: Extra | None = None,
    approval: str | ApprovalRule | None = None,
) -> Callable[[Callable[..., Any]], Tool]: ...
def tool(
    fn: Callable[..., Any] | None = None, /, **options: Any
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Make a function a guarded tool. Works bare (``@tool``) or with options.

    The input schema comes from the signature: parameters with defaults are
    not required, ``Literal`` becomes ``enum``, ``Annotated[..., Field(...)]``
    carries descriptions. The docstring is the description. Parameters named
    in ``bind`` are filled from the turn's context and hidden from the model.
    """
    if fn is not None:
        return _from_function(fn, **options)

    def decorate(f: Callable[..., Any]) -> Tool:
        return _from_function(f, **options)

    return decorate


def _from_function(
    fn: Callable[..., Any],
    *,
    name: str | None = None,
    description: str | None = None,
    **options: Any,
) -> Tool:
    tool_name: str = name or getattr(fn, "__name__", "") or ""
    bound = frozenset((options.get("bind") or {}).keys())
    schema, convert = _signature_schema(fn, tool_name, bound)
    if description is None:
        description = inspect.getdoc(fn) or ""
    return Tool(tool_name, fn, schema, description=description, convert=convert, **options)


def _signature_schema(
    fn: Callable[..., Any], owner: str, bound: frozenset[str]
) -> tuple[dict[str, Any], Callable[[dict[str, Any]], dict[str, Any]] | None]:
    try:
        signature = inspect.signature(fn)
        hints = typing.get_type_hints(fn, include_extras=True)
    except (TypeError, ValueError, NameError) as exc:
        raise SchemaError(f"tool {owner!r}: cannot read the signature: {exc}") from exc
    fields: dict[str, Any] = {}
    native = True
    for param in signature.parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise SchemaError(f"tool {owner!r}: *args and **kwargs cannot be described to a model")
        if param.kind is param.POSITIONAL_ONLY:
            raise SchemaError(f"tool {owner!r}: parameter {param.name!r} is positional-only")
        if param.name in bound:
            continue
        annotation = hints.get(param.name, Any)
        default = ... if param.default is param.empty else param.default
        fields[param.name] = (annotation, default)
        native = native and _json_native(annotation)
    missing = bound - set(signature.parameters)
    if missing:
        raise ConfigurationError(
            f"tool {owner!r}: bound parameter {sorted(missing)[0]!r} is not in its signature"
        )
    try:
        model = pydantic.create_model(f"{owner or 'tool'}_arguments", **fields)
        schema = model.model_json_schema()
    except (pydantic.PydanticUserError, pydantic.PydanticSchemaGenerationError, TypeError) as exc:
        raise SchemaError(f"tool {owner!r}: cannot derive a schema: {exc}") from exc
    schema = _strip_titles(schema)
    schema["additionalProperties"] = False
    schema.setdefault("properties", {})
    # The bound parameters exist in the schema the tool was defined with; they
    # are removed again from what the model sees.
    for bound_name in bound:
        schema["properties"][bound_name] = {}
    if native:
        return schema, None

    def convert(arguments: dict[str, Any]) -> dict[str, Any]:
        parsed = model.model_validate(arguments)
        return {key: getattr(parsed, key) for key in arguments}

    return schema, convert


def _strip_titles(node: Any) -> Any:
    if isinstance(node, dict):
        return {
            k: _strip_titles(v)
            for k, v in node.items()
            if not (k == "title" and isinstance(v, str))
        }
    if isinstance(node, list):
        return [_strip_titles(v) for v in node]
    return node


_NATIVE = (str, int, float, bool, type(None), dict, list, Any)


def _json_native(annotation: Any) -> bool:
    """True when a JSON value that satisfies the schema can be passed as is."""
    if annotation in _NATIVE:
        return True
    origin = typing.get_origin(annotation)
    if origin is Literal:
        return True
    if origin in (typing.Annotated,):
        return _json_native(typing.get_args(annotation)[0])
    if origin in (Union, types.UnionType, list, dict):
        return all(_json_native(a) for a in typing.get_args(annotation))
    return False
