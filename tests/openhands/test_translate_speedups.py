"""The translator's cheaper ways to the same answers (replaying a long history asks them
thousands of times): message ids derived without `uuid.UUID` objects, class names per class."""

from __future__ import annotations

import uuid

import pytest

from trio_acp.openhands.translate import content
from trio_acp.openhands.translate.streams import _ID_NAMESPACE, message_id

KEYS = [
    "",
    "chatcmpl-123",
    "a" * 10_000,
    "é ü 中文 🙂",
    "\x00\x1f\n",
    str(uuid.uuid4()),
    *(f"resp-{i}" for i in range(200)),
]


@pytest.mark.parametrize("part", ["message", "thought", "user", "finish", "think", ""])
def test_message_ids_are_uuid5_of_the_namespace(part):
    for key in KEYS:
        expected = str(uuid.uuid5(_ID_NAMESPACE, f"{part}\x1f{key}"))
        message_id.cache_clear()
        assert message_id(key, part) == expected
        assert message_id(key, part) == expected  # cached


def test_a_name_that_is_not_utf8_fails_as_uuid5_fails():
    message_id.cache_clear()
    with pytest.raises(UnicodeEncodeError):
        uuid.uuid5(_ID_NAMESPACE, "message\x1f\ud800")
    with pytest.raises(UnicodeEncodeError):
        message_id("\ud800", "message")


def test_class_names_follow_the_mro():
    class Base:
        pass

    class Action(Base):
        pass

    class FinishAction(Action):
        pass

    assert content.class_names(FinishAction()) == ("FinishAction", "Action", "Base", "object")
    assert content.class_names(Action()) == ("Action", "Base", "object")
    assert content.class_names(None) == ("NoneType", "object")
    assert content.is_a(FinishAction(), "Action") and not content.is_a(Action(), "FinishAction")
    # Classes made at run time, more than the cache holds: each still answered rightly.
    made = [type(f"Made{i}", (Base,), {}) for i in range(1_200)]
    for cls in made:
        assert content.class_names(cls()) == (cls.__name__, "Base", "object")
