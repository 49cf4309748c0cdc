"""Decoding never fails with anything but SchemaError, whatever JSON arrives."""

import pytest
from _schema_helpers import json_values, strategy
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import trio_acp.schema as S
from trio_acp.schema import SchemaError, from_wire, to_wire

SPECS = [*S.AGENT_METHODS.values(), *S.CLIENT_METHODS.values(), *S.PROTOCOL_METHODS.values()]
TYPES = {spec.params for spec in SPECS} | {spec.result for spec in SPECS if spec.result is not None}
TYPES_BY_NAME = {next(n for n in S.__all__ if getattr(S, n) is tp): tp for tp in TYPES}

FUZZ = settings(
    max_examples=50,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def _decode(tp, data):
    try:
        value = from_wire(tp, data)
    except SchemaError as e:
        assert str(e)
        return None
    # Whatever decodes must encode again.
    to_wire(value)
    return value


def _paths(value, prefix=()):
    yield prefix
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _paths(v, prefix + (k,))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _paths(v, prefix + (i,))


def _replace(value, path, new):
    if not path:
        return new
    head, *rest = path
    if isinstance(value, dict):
        return {**value, head: _replace(value[head], rest, new)}
    return [_replace(v, rest, new) if i == head else v for i, v in enumerate(value)]


# Keys that make random objects look like ACP messages, to get past the first check.
_KEYS = st.sampled_from(["sessionId", "prompt", "type", "update", "_meta", "value", "outcome"])
_RANDOM = json_values | st.dictionaries(_KEYS, json_values)


@pytest.mark.parametrize("name", sorted(TYPES_BY_NAME))
def test_any_json_decodes_or_raises_schema_error(name):
    tp = TYPES_BY_NAME[name]

    @FUZZ
    @given(st.data())
    def check(data):
        if data.draw(st.booleans()):
            # Arbitrary JSON.
            _decode(tp, data.draw(_RANDOM))
        else:
            # A valid message (unknown variants included) with one part replaced.
            wire = to_wire(data.draw(strategy(tp, unknown=True)))
            path = data.draw(st.sampled_from(list(_paths(wire))))
            _decode(tp, _replace(wire, path, data.draw(json_values)))

    check()
