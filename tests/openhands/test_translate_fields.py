"""`translate.fields.field`: the same answers as ``getattr(obj, name, None)``, on litellm's
stream chunks (whose pydantic models keep their fields in ``__pydantic_extra__``) and on
anything else the translator may be handed."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pydantic
import pytest
from litellm.types.utils import (
    ChatCompletionDeltaToolCall,
    Delta,
    Function,
    ModelResponseStream,
    StreamingChoices,
)

from trio_acp.openhands.translate.fields import field

NAMES = [
    "id",
    "choices",
    "index",
    "delta",
    "finish_reason",
    "content",
    "reasoning_content",
    "tool_calls",
    "function",
    "name",
    "arguments",
    "role",
    "model",
    "usage",
    "no_such_field",
]


class Declared(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="allow")

    content: str = "declared"

    @property
    def name(self) -> str:
        return "a property"


class WithClassAttribute:
    index = 3

    def __init__(self) -> None:
        self.content = "instance"


def _objects() -> list[Any]:
    call = ChatCompletionDeltaToolCall(
        id="call_1", index=0, function=Function(name="terminal", arguments='{"co')
    )
    chunks = [
        ModelResponseStream(
            id="chatcmpl-1",
            choices=[StreamingChoices(index=0, delta=Delta(content="abcd", role="assistant"))],
        ),
        ModelResponseStream(
            id="chatcmpl-2",
            choices=[
                StreamingChoices(
                    index=1, finish_reason="stop", delta=Delta(reasoning_content="hmm")
                )
            ],
        ),
        ModelResponseStream(
            id="chatcmpl-3", choices=[StreamingChoices(delta=Delta(tool_calls=[call]))]
        ),
    ]
    objects: list[Any] = []
    for chunk in chunks:
        objects.append(chunk)
        for choice in chunk.choices:
            objects += [choice, choice.delta]
            objects += list(choice.delta.tool_calls or [])
    objects.append(call.function)
    objects += [
        Declared(reasoning_content="extra", id=7),
        SimpleNamespace(id="x", content="y"),
        WithClassAttribute(),
        "a string",
        None,
        42,
    ]
    return objects


@pytest.mark.parametrize("obj", _objects(), ids=lambda o: type(o).__name__)
def test_field_reads_what_getattr_reads(obj: Any) -> None:
    for name in NAMES:
        assert field(obj, name) == getattr(obj, name, None), name


def test_a_property_or_class_attribute_wins_over_the_fields() -> None:
    model = Declared(name="extra name")  # shadowed by the property, as getattr does
    assert field(model, "name") == "a property"
    assert field(model, "content") == "declared"
    assert field(WithClassAttribute(), "index") == 3
