"""The method tables against the schema's own method annotations."""

import acp
from _schema_helpers import DEFS

import trio_acp.schema as S


def _schema_methods(side: str) -> dict[str, dict[str, str]]:
    """method -> {"params"/"result": $def name}, from the x-side/x-method annotations."""
    out: dict[str, dict[str, str]] = {}
    for name, d in DEFS.items():
        if d.get("x-side") != side:
            continue
        kind = "result" if name.endswith("Response") else "params"
        out.setdefault(d["x-method"], {})[kind] = name
    return out


def _ours(table: dict[str, S.MethodSpec]) -> dict[str, dict[str, str]]:
    out = {}
    for method, spec in table.items():
        assert spec.method == method
        entry = {"params": _name(spec.params)}
        if spec.result is not None:
            entry["result"] = _name(spec.result)
        out[method] = entry
    return out


def _name(tp) -> str:
    return next(n for n in S.__all__ if getattr(S, n) is tp)


def test_agent_methods_match_the_schema():
    assert _ours(S.AGENT_METHODS) == _schema_methods("agent")


def test_client_methods_match_the_schema():
    assert _ours(S.CLIENT_METHODS) == _schema_methods("client")


def test_protocol_methods_match_the_schema():
    assert _ours(S.PROTOCOL_METHODS) == _schema_methods("protocol")
    assert S.CANCEL_REQUEST_METHOD == "$/cancel_request"


def test_notifications_have_no_result():
    notifications = {
        m for t in (S.AGENT_METHODS, S.CLIENT_METHODS) for m, s in t.items() if s.is_notification
    }
    assert notifications == {"session/cancel", "session/update", "elicitation/complete"}


def test_protocol_version():
    assert S.PROTOCOL_VERSION == 1 == acp.PROTOCOL_VERSION


def test_generated_types_are_up_to_date():
    """types.py is what scripts/gen_schema.py makes of the installed official schema."""
    import importlib.util
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    spec = importlib.util.spec_from_file_location("gen_schema", root / "scripts/gen_schema.py")
    gen = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("gen_schema", gen)  # dataclasses look their module up there
    spec.loader.exec_module(gen)
    committed = (root / "src/trio_acp/schema/types.py").read_text()
    assert gen.render() == committed, "run `uv run python scripts/gen_schema.py`"
