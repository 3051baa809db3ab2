from collections.abc import Callable
from types import MappingProxyType
from typing import Any

from .verdicts import Reason

def canonical(arguments: Any, limit: int) -> tuple[dict[str, Any], Any] | Reason: ...
def configure(
    not_json: Reason,
    too_large: Reason,
    not_an_object: Reason,
    frozen_dict: type[dict[str, Any]],
    frozen_list: type[list[Any]],
    proxy: type[MappingProxyType[str, Any]],
    parse: Callable[[Any, int], Any],
    max_depth: int,
    /,
) -> None: ...
def flat_valid(
    plan: tuple[bool, tuple[str, ...], dict[str, tuple[Any, ...]]], arguments: Any, /
) -> bool: ...
def flat_offending(
    plan: tuple[bool, tuple[str, ...], dict[str, tuple[Any, ...]]], arguments: Any, /
) -> tuple[tuple[str, ...], bool] | None: ...
def json_text(value: Any, fallback: Callable[[Any], str], /) -> str: ...
def render(value: Any, max_chars: int, /) -> tuple[str, bool]: ...
def configure_render(render_py: Callable[[Any, int], tuple[str, bool]], marker: str, /) -> None: ...
def chain_link(row: tuple[Any, ...], previous: str, row_id: int, /) -> str | None: ...
def chain_text(row: tuple[Any, ...], /) -> str | None: ...
def sqlite_params(
    row: tuple[Any, ...], row_id: int, digest: str, /
) -> tuple[int, tuple[Any, ...]] | None: ...
def configure_chain(
    row_type: type[tuple[Any, ...]],
    shapes: bytes,
    limits: tuple[int, ...],
    sha256: Callable[[bytes], Any],
    native: bool,
    /,
) -> bool: ...
def word_table(keys: tuple[bytes, ...], tracked: int, /) -> object: ...
def scan_words(
    table: object, tokens: bytes, want_odd: bool, /
) -> tuple[dict[bytes, int], list[bytes] | None, dict[bytes, list[int]]]: ...
