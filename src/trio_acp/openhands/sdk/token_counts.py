"""The condenser's token counts, each message counted once instead of at every model call.

With a model whose context window the SDK knows (any mainstream model), its summarizing
condenser counts the tokens of the whole history before every model call
(`get_total_token_count` → `LLM.get_token_count` → litellm's `token_counter`), encoding
every message's text again each time: ~36 ms of CPU per 20,000-token reply in the history,
per call (bench/README.md, "Item 6 against the OpenHands CLI"). litellm counts a message
list as a sum over its messages (`_count_messages`: each message's own part depends on
that message alone) plus a part for the tools (`_count_extra`: the tools and whether a
system message is there). So `count` asks litellm for each message alone, keeps the
number under a digest of the message as formatted for the model (and the model's name:
the tokenizer is litellm's choice for it), and adds the tools' part, kept the same way:
the same total, with only new messages encoded.

Only for litellm's own tokenizer choice (no `custom_tokenizer`, whose chat template may
count the list as a whole) and native tool calls (the SDK rewrites the whole list for
mocked ones): `SessionLLM.get_token_count` leaves those to the SDK. A message that does
not serialize to JSON is counted each time. `TRIO_ACP_TOKEN_COUNT_CACHE=0` leaves every
count to the SDK (to measure the difference in one sitting).
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence

from litellm import token_counter
from litellm.types.llms.openai import ChatCompletionToolParam

#: Counts kept (a message's digest is 32 bytes): a long session's history and then some.
LIMIT = 50_000


def enabled() -> bool:
    # Read per call, not at the import: a warm server's child takes its launcher's
    # environment after the import (warm.py).
    return os.environ.get("TRIO_ACP_TOKEN_COUNT_CACHE") != "0"


class _Counts:
    """A bounded map (least recently used out) shared by the sessions' threads."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._counts: OrderedDict[tuple[str, bytes], int] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: tuple[str, bytes]) -> int | None:
        with self._lock:
            count = self._counts.get(key)
            if count is not None:
                self._counts.move_to_end(key)
            return count

    def put(self, key: tuple[str, bytes], count: int) -> None:
        with self._lock:
            self._counts[key] = count
            self._counts.move_to_end(key)
            while len(self._counts) > self._limit:
                self._counts.popitem(last=False)

    def __len__(self) -> int:
        return len(self._counts)

    def clear(self) -> None:
        with self._lock:
            self._counts.clear()


_messages = _Counts(LIMIT)
_tools = _Counts(64)


def count(
    model: str, messages: Sequence[Mapping[str, object]], tools: list[ChatCompletionToolParam]
) -> int:
    """litellm's `token_counter(model=model, messages=messages, tools=tools or None)`."""
    total = 0
    for message in messages:
        key = _key(model, message)
        known = None if key is None else _messages.get(key)
        if known is None:
            # count_response_tokens: the message's own part only, without the tools' part.
            known = int(token_counter(model=model, messages=[message], count_response_tokens=True))
            if key is not None:
                _messages.put(key, known)
        total += known
    with_system = any(message.get("role") == "system" for message in messages)
    return total + _tools_part(model, tools, with_system)


def _tools_part(model: str, tools: list[ChatCompletionToolParam], with_system: bool) -> int:
    """What litellm adds to a list's count for `tools` (the reply's priming, the tools'
    definitions, less a little with a system message): an empty message's count with
    them less its count without."""
    key = _key(model, {"tools": tools, "with_system": with_system})
    known = None if key is None else _tools.get(key)
    if known is None:
        empty = [{"role": "system" if with_system else "user", "content": ""}]
        known = int(token_counter(model=model, messages=empty, tools=tools or None)) - int(
            token_counter(model=model, messages=empty, count_response_tokens=True)
        )
        if key is not None:
            _tools.put(key, known)
    return known


def _key(model: str, value: object) -> tuple[str, bytes] | None:
    try:
        text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    except (TypeError, ValueError):
        return None  # not plain JSON: counted each time rather than risk a wrong match
    return model, hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=32).digest()


def kept() -> int:
    """How many messages' counts are kept (for the tests)."""
    return len(_messages)


def forget() -> None:
    """Drop every kept count (for the tests)."""
    _messages.clear()
    _tools.clear()
