"""The conformance table: what every entry point must answer in each row of the scenario.

One ``Row`` per situation: the model's steps (each a tuple of calls made in one
model turn) and, for each call, the ``Answer`` every entry point gives. An
entry point that cannot honour a row says so in ``ENTRY_POINTS``: a
``Difference`` carries the reason (the same words stand in the entry point's
docs page) and what it answers instead, or ``None`` when the row does not
apply to it. The tests hold each entry point to its column; the page
``docs/integrations/conformance.md`` is rendered from this module
(``render.py``) and a test keeps the two in agreement.

The sentences below are literal on purpose: they are the public text the model
reads, and a test compares them with what the engine sends.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tests.conformance import scenario as sc

# -- what the model reads -------------------------------------------------------------

ERROR = (
    "The tool failed while running. No details are available; do not retry with the same arguments."
)
INVALID = "The arguments were not accepted."
LIMIT = "A usage limit was reached. Do not retry this call."
UNAVAILABLE = "This tool is not available now."
MISSING_TO = "The arguments were not accepted. Check these parameters: to."
UNDECLARED = "The arguments were not accepted. Send only the parameters that the tool declares."
TRUNCATION_MARKER = "\n[guardrails: result truncated]"
APPROVAL_PENDING = (
    "This call needs a person's approval and did not run. Once it is approved, the same call "
    "with the same arguments will run."
)


@dataclass(frozen=True)
class Text:
    """The model reads exactly this text."""

    text: str


@dataclass(frozen=True)
class Truncated:
    """The model reads the first characters of ``text`` and the truncation note, ``limit`` in all."""

    text: str
    limit: int

    @property
    def expected(self) -> str:
        return self.text[: self.limit - len(TRUNCATION_MARKER)] + TRUNCATION_MARKER


@dataclass(frozen=True)
class Json:
    """The model reads a JSON text of ``value`` (and, where the format has one, the same
    value as structured content)."""

    value: Any


@dataclass(frozen=True)
class Image:
    """The model receives an image, in the format's own image block (and, where a
    ``Difference`` says so, a text block beside it starting with ``note``)."""

    mime: str
    data: str  # base64
    note: str | None = None


Content = Text | Truncated | Json | Image


@dataclass(frozen=True)
class Answer:
    """One call's expected answer.

    ``outcome`` and ``content``: what the model receives (with the format's
    error flag set for every outcome but ``ok``); ``ran``: whether the tool's
    body ran; ``reason``: the audit row's reason (its row is ``tool_call``,
    the tool's name, the outcome); ``fault``: the ``error.type`` of a span
    whose status is ERROR (None: status unset; the ``error.type`` of a refusal
    is its outcome); ``audited``: False for a call that never reaches the
    engine (no audit row, no span), where a ``Difference`` says so; ``passes``:
    how many times the call goes through tool_call, each with its audit row and
    span (2 for a call the framework paused and then resumed).
    """

    outcome: str
    content: Content
    ran: bool
    reason: str | None = None
    fault: str | None = None
    audited: bool = True
    passes: int = 1


@dataclass(frozen=True)
class Call:
    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True)
class Expected:
    """A row's answers, one per call in the order the model asked; escapes and faults in all."""

    answers: tuple[Answer, ...]
    escapes: int = 0
    faults: int = 0


@dataclass(frozen=True)
class Row:
    id: str
    title: str
    steps: tuple[tuple[Call, ...], ...]
    expected: Expected
    note: str = ""  # what the row also asks of an entry point, beyond its answers

    @property
    def calls(self) -> tuple[Call, ...]:
        return tuple(call for step in self.steps for call in step)


@dataclass(frozen=True)
class Difference:
    """What an entry point answers instead of the row, and why (``None``: the row does not apply)."""

    reason: str
    expected: Expected | None = None


@dataclass(frozen=True)
class EntryPoint:
    id: str
    title: str
    docs: str  # the page that states its differences, from the repository's root
    error_flag: bool  # its answers carry an error flag (is_error, isError)
    differences: dict[str, Difference] = field(default_factory=dict)
    # Why the audit row and span cannot carry the model's own call id (None: they do).
    no_call_ids: str | None = None
    structured: bool = False  # its answers carry structured content beside the text


def _one(
    outcome: str,
    content: Content,
    ran: bool,
    reason: str | None = None,
    fault: str | None = None,
    **totals: int,
) -> Expected:
    return Expected((Answer(outcome, content, ran, reason, fault),), **totals)


def _step(name: str, **arguments: Any) -> tuple[Call, ...]:
    return (Call(name, arguments),)


UNKNOWN_TOOL = "wire_money"
BALANCE = sc.balance_of(sc.ACCOUNT)
PAYEE_OK = sc.transfer_of(sc.SHAKY_PAYEE, 5)
HITS = sc.hits_of("fees")

ROWS: tuple[Row, ...] = (
    Row(
        "valid",
        "a valid call (its bound `account_id` filled from the session)",
        (_step("balance"),),
        _one("ok", Text(BALANCE), True),
    ),
    Row(
        "limit",
        "a guard rejects with `limit` (a transfer over the limit)",
        (_step("transfer", to="bob", amount=500),),
        _one("limit", Text(LIMIT), False, "guard"),
    ),
    Row(
        "missing",
        "a required argument is missing",
        (_step("transfer", amount=5),),
        _one("invalid_args", Text(MISSING_TO), False, "missing_required"),
    ),
    Row(
        "undeclared",
        "an argument the tool does not declare",
        (_step("transfer", to="bob", amount=5, memo="x"),),
        _one("invalid_args", Text(UNDECLARED), False, "undeclared_parameter"),
    ),
    Row(
        "bound",
        "the model chooses a bound argument",
        (_step("balance", account_id="acc-666"),),
        _one("invalid_args", Text(INVALID), False, "bound_argument_supplied"),
    ),
    Row(
        "not_offered",
        "a tool registered but not offered to the tenant",
        (_step("close_account"),),
        _one("unavailable", Text(UNAVAILABLE), False, "not_offered"),
    ),
    Row(
        "unknown_twice",
        "an unknown tool, in two model turns (the run goes on)",
        (_step(UNKNOWN_TOOL), _step(UNKNOWN_TOOL)),
        Expected(
            (
                Answer("unavailable", Text(UNAVAILABLE), False, "unknown_tool"),
                Answer("unavailable", Text(UNAVAILABLE), False, "unknown_tool"),
            )
        ),
    ),
    Row(
        "parallel",
        "two calls in one model turn",
        ((Call("balance", {}), Call("search", {"query": "fees"})),),
        Expected((Answer("ok", Text(BALANCE), True), Answer("ok", Json(HITS), True))),
    ),
    Row(
        "fail_open",
        "a fail-open guard raises (the transfer goes on)",
        (_step("transfer", to=sc.SHAKY_PAYEE, amount=5),),
        _one("ok", Text(PAYEE_OK), True, escapes=1),
    ),
    Row(
        "fail_closed",
        "a fail-closed guard raises (the search does not run)",
        (_step("search", query=sc.SHAKY_QUERY),),
        _one("unavailable", Text(UNAVAILABLE), False, "guard", "FilterDown", faults=1),
    ),
    Row(
        "oversized",
        f"a result longer than the cap ({sc.MAX_RESULT} characters)",
        (_step("history"),),
        _one("ok", Truncated(sc.history_text(), sc.MAX_RESULT), True),
    ),
    Row(
        "image",
        "an image result",
        (_step("chart"),),
        _one("ok", Image("image/png", sc.PNG_B64), True),
    ),
    Row(
        "structured",
        "a structured (JSON object) result",
        (_step("search", query="fees"),),
        _one("ok", Json(HITS), True),
    ),
    Row(
        "approval",
        "a framework-native approval, then its resumption",
        (_step("transfer", to="bob", amount=50),),
        _one("ok", Text(sc.transfer_of("bob", 50)), True),
        "The call waits for the framework's approval (it is not audited as `ok` while it "
        "waits) and, once approved, runs once in the same turn: one `pre_turn`, the same "
        "ceilings.",
    ),
    Row(
        "held",
        "a call that needs a person's approval, none given",
        (_step("transfer", to=sc.HELD_PAYEE, amount=20),),
        _one("unavailable", Text(APPROVAL_PENDING), False, "approval_pending"),
        "The request is stored, once, for exactly these arguments; the call runs only when "
        "the same call comes after a person approved it. Where the framework pauses the run "
        "for it, the run is resumed with the framework's own approval, which is advisory.",
    ),
)
ROW = {row.id: row for row in ROWS}

# -- the entry points and their documented differences ----------------------------------

NO_APPROVAL = Difference("It has no approval step of its own: a call runs or is refused at once.")
GATEWAY_APPROVAL = Difference(
    "A call runs or is refused at once; a call that needs a person's approval is refused "
    "(`unavailable`, with the approval sentences) until the same call comes again after it "
    "was approved"
)

# A framework that pauses a held call: resumed with its own approval (advisory).
PAUSED = Difference(
    "The run pauses for a person's approval the framework's own way, the approval sentence "
    "in the pause; resumed with the framework's own approval, which is advisory, the call "
    "goes through tool_call again and the model reads the gate's answer: two `tool_call` "
    "rows and spans, naming one request.",
    Expected((Answer("unavailable", Text(APPROVAL_PENDING), False, "approval_pending", passes=2),)),
)


RUNNER_ANSWERS = (
    "The SDK's tool runner answers a tool it was not given by itself, with its own text "
    "(`Error: Tool '<name>' not found`, `is_error`) and a `UserWarning`: the call never "
    "reaches tool_call, so it leaves no audit row and no span. Use `run_tool_loop` where "
    "that matters."
)


NO_GUARD_CODE = (
    "The gateway takes no guard code: its rules are its configuration and its policy "
    "file, which decide without raising, so no call goes on past a guard that raised "
    "(no escape) or is stopped by one (no fault)."
)
NO_MCP_CALL_IDS = (
    "MCP's `tools/call` carries no call id: the audit row and the span carry an id of their own."
)

# ``chart``'s result as the OpenAI Responses API's own image item.
IMAGE_ITEM = {"type": "input_image", "image_url": f"data:image/png;base64,{sc.PNG_B64}"}


def _runner_answer(name: str) -> Expected:
    text = Text(f"Error: Tool '{name}' not found")
    return Expected((Answer("unavailable", text, False, audited=False),))


CLAUDE_CLI_ANSWERS = (
    "The CLI answers a call of a tool that does not exist at all before any hook runs, "
    "with its own text naming the tool the model wrote; nothing reaches tool_call, so it "
    "leaves no audit row and no span."
)


def _cli_answer(name: str) -> Answer:
    text = f"<tool_use_error>Error: No such tool available: mcp__bank__{name}</tool_use_error>"
    return Answer("unavailable", Text(text), False, audited=False)


ENTRY_POINTS: dict[str, EntryPoint] = {
    ep.id: ep
    for ep in (
        EntryPoint(
            "turn.call",
            "`turn.call` / `turn.acall`",
            "docs/tool_call.md",
            error_flag=True,
            differences={
                "approval": NO_APPROVAL,
                "image": Difference(
                    "`ToolResult.content` is text: a tool that returns bytes fails as "
                    "`unserialisable` after its body ran; return text (base64) or "
                    "use an integration whose format carries images.",
                    _one("error", Text(ERROR), True, "unserialisable", "TypeError"),
                ),
            },
        ),
        EntryPoint(
            "anthropic",
            "Anthropic Messages API (`run_tool_loop`, `arun_tool_loop`, `guard_beta_tools`)",
            "docs/integrations/anthropic.md",
            error_flag=True,
            differences={"approval": NO_APPROVAL},
        ),
        EntryPoint(
            "anthropic.tool_runner",
            "Anthropic SDK's `tool_runner` over `guard_beta_tools`",
            "docs/integrations/anthropic.md",
            error_flag=True,
            differences={
                "approval": NO_APPROVAL,
                "not_offered": Difference(RUNNER_ANSWERS, _runner_answer("close_account")),
                "unknown_twice": Difference(
                    RUNNER_ANSWERS,
                    Expected(_runner_answer(UNKNOWN_TOOL).answers * 2),
                ),
            },
            no_call_ids=(
                "The SDK's runner hands a tool its input only, not the `tool_use` id: the "
                "audit row and the span carry an id of their own."
            ),
        ),
        EntryPoint(
            "openai.chat",
            "OpenAI Chat Completions (`tool_messages`, `atool_messages`)",
            "docs/integrations/openai.md",
            error_flag=False,
            differences={
                "approval": NO_APPROVAL,
                "image": Difference(
                    "A Chat Completions `tool` message carries text only: a tool that returns "
                    "an image item is answered with its JSON text. The Responses API carries "
                    "the image.",
                    _one("ok", Json(IMAGE_ITEM), True),
                ),
            },
        ),
        EntryPoint(
            "openai.responses",
            "OpenAI Responses API (`function_call_outputs`, `afunction_call_outputs`)",
            "docs/integrations/openai.md",
            error_flag=False,
            differences={"approval": NO_APPROVAL},
        ),
        EntryPoint(
            "agent_framework",
            "Microsoft Agent Framework (`guard_agent`: `agent.run`, streamed or not)",
            "docs/integrations/agent_framework.md",
            error_flag=False,
            differences={"held": PAUSED},
        ),
        EntryPoint(
            "google_adk",
            "Google ADK (`google_adk.plugin`: `runner.run_async`, `runner.run`)",
            "docs/integrations/google_adk.md",
            error_flag=False,
            differences={"held": PAUSED},
        ),
        EntryPoint(
            "langchain",
            "LangChain v1 `create_agent` (`langchain.middleware`: `invoke`, `ainvoke`, `astream`)",
            "docs/integrations/langchain.md",
            error_flag=True,
            differences={"held": PAUSED},
        ),
        EntryPoint(
            "openai_agents",
            "OpenAI Agents SDK (`openai_agents.guard_agent`: `Runner.run`, `run_sync`, `run_streamed`)",
            "docs/integrations/openai_agents.md",
            error_flag=False,
            differences={"held": PAUSED},
        ),
        EntryPoint(
            "claude_agent",
            "Claude Agent SDK (`guard_options`: `query` and `ClaudeSDKClient`, through the bundled CLI)",
            "docs/integrations/claude_agent.md",
            error_flag=True,
            differences={
                "unknown_twice": Difference(
                    CLAUDE_CLI_ANSWERS, Expected((_cli_answer(UNKNOWN_TOOL),) * 2)
                ),
                "image": Difference(
                    "The CLI keeps an image a tool returns in a file of the session and sends "
                    "the model, beside the image block, a text block naming that file "
                    "(`[Image: source: <path>]`).",
                    _one("ok", Image("image/png", sc.PNG_B64, "[Image: source: "), True),
                ),
            },
        ),
        EntryPoint(
            "pydantic_ai",
            "pydantic-ai (`pydantic_ai.capability`: `run_sync`, `run`, `run_stream`)",
            "docs/integrations/pydantic_ai.md",
            error_flag=True,
            differences={"held": PAUSED},
        ),
        EntryPoint(
            "mcp",
            "MCP server (`guarded_server`, `GuardedTools`)",
            "docs/integrations/mcp.md",
            error_flag=True,
            differences={"approval": NO_APPROVAL},
            no_call_ids=NO_MCP_CALL_IDS,
            structured=True,
        ),
        EntryPoint(
            "gateway",
            "The MCP gateway (`guardrails gateway`, over stdio and streamable HTTP)",
            "docs/gateway.md",
            error_flag=True,
            differences={
                "approval": GATEWAY_APPROVAL,
                "fail_open": Difference(NO_GUARD_CODE, _one("ok", Text(PAYEE_OK), True)),
                "fail_closed": Difference(
                    NO_GUARD_CODE, _one("ok", Json(sc.hits_of(sc.SHAKY_QUERY)), True)
                ),
            },
            no_call_ids=NO_MCP_CALL_IDS,
            structured=True,
        ),
    )
}


def expected(entry: str, row: Row) -> tuple[Expected | None, Difference | None]:
    """What ``entry`` must answer in ``row``, and the documented difference it follows (if any)."""
    difference = ENTRY_POINTS[entry].differences.get(row.id)
    if difference is not None:
        return difference.expected, difference
    return row.expected, None
