"""What the converter promises beyond "valid in, valid out": unknown variants, ``_meta``,
None left out, strict JSON types, leniency where real peers need it, error messages."""

import attrs
import pytest
from _schema_helpers import UNION_BY_NAME, strategy
from hypothesis import HealthCheck, given, settings

import trio_acp.schema as S
from trio_acp.schema import SchemaError, UnknownVariant, from_wire, to_wire

CONFIG = {"sessionId": "s", "configId": "c"}

# -- encoding --------------------------------------------------------------------------


def test_camel_case_tag_and_none_left_out():
    note = S.SessionNotification(
        session_id="s1",
        update=S.AgentMessageChunk(content=S.TextContent(text="hi"), message_id="m1"),
    )
    assert to_wire(note) == {
        "sessionId": "s1",
        "update": {
            "sessionUpdate": "agent_message_chunk",
            "content": {"type": "text", "text": "hi"},
            "messageId": "m1",
        },
    }


def test_variant_encoded_alone_carries_its_tag():
    assert to_wire(S.TextContent(text="x")) == {"type": "text", "text": "x"}
    assert to_wire(S.ToolCallProgress(tool_call_id="t", status="completed")) == {
        "sessionUpdate": "tool_call_update",
        "toolCallId": "t",
        "status": "completed",
    }
    # The same payload outside the union has no tag.
    assert to_wire(S.ToolCallUpdate(tool_call_id="t")) == {"toolCallId": "t"}


def test_default_variants_are_written_without_a_tag():
    assert to_wire(S.McpServerStdio(name="fs", command="mcp-fs")) == {
        "name": "fs",
        "command": "mcp-fs",
        "args": [],
        "env": [],
    }
    assert to_wire(S.AuthMethodAgent(id="a", name="Login")) == {"id": "a", "name": "Login"}
    assert to_wire(S.McpServerSse(name="x", url="u"))["type"] == "sse"


def test_meta_is_carried_both_ways():
    meta = {"traceparent": "00-abc", "x": [1, {"y": None}]}
    block = S.TextContent(text="x", meta=meta)
    wire = to_wire(block)
    assert wire["_meta"] == meta
    assert from_wire(S.ContentBlock, wire).meta == meta
    assert from_wire(S.PromptRequest, {"sessionId": "s", "prompt": [], "_meta": meta}).meta == meta


def test_a_non_variant_in_a_union_is_a_programming_error():
    with pytest.raises(TypeError, match="ToolCallUpdate is not a"):
        to_wire(S.SessionNotification(session_id="s", update=S.ToolCallUpdate(tool_call_id="t")))


def test_lists_of_values_encode():
    assert to_wire([S.TextContent(text="a"), S.Terminal(terminal_id="t")]) == [
        {"type": "text", "text": "a"},
        {"type": "terminal", "terminalId": "t"},
    ]


def test_set_config_option_value_type_follows_the_value():
    bool_req = S.SetSessionConfigOptionRequest(session_id="s", config_id="c", value=True)
    assert to_wire(bool_req) == {**CONFIG, "value": True, "type": "boolean"}
    str_req = S.SetSessionConfigOptionRequest(session_id="s", config_id="c", value="fast")
    assert to_wire(str_req) == {**CONFIG, "value": "fast"}
    assert from_wire(S.SetSessionConfigOptionRequest, to_wire(bool_req)) == bool_req
    assert from_wire(S.SetSessionConfigOptionRequest, to_wire(str_req)) == str_req


# -- unknown variants ------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(UNION_BY_NAME))
def test_unknown_tag_decodes_to_unknown_variant_and_back(name):
    union = UNION_BY_NAME[name]
    key = S.TAGGED_UNIONS[union].key
    data = {key: "from_the_future", "payload": [1, {"deep": None}], "_meta": {"k": "v"}}
    value = from_wire(union, data)
    assert value == UnknownVariant("from_the_future", data)
    assert to_wire(value) == data


def test_unknown_variants_survive_inside_messages():
    wire = {
        "sessionId": "s",
        "update": {
            "sessionUpdate": "tool_call",
            "toolCallId": "t1",
            "title": "Run",
            "kind": "teleport",  # enum-like values from newer peers are kept too
            "content": [
                {"type": "content", "content": {"type": "hologram", "frames": 3}},
                {"type": "video", "url": "https://example.com/v"},
            ],
        },
    }
    note = from_wire(S.SessionNotification, wire)
    assert isinstance(note.update, S.ToolCallStart)
    assert note.update.kind == "teleport"
    content = wire["update"]["content"]
    assert note.update.content[0].content == UnknownVariant("hologram", content[0]["content"])
    assert note.update.content[1] == UnknownVariant("video", content[1])
    assert to_wire(note) == wire

    unknown_update = {"sessionId": "s", "update": {"sessionUpdate": "plan_removed", "_meta": {}}}
    assert to_wire(from_wire(S.SessionNotification, unknown_update)) == unknown_update


def test_unknown_mcp_server_auth_method_and_config_option():
    new_session = {"cwd": "/w", "mcpServers": [{"type": "acp", "name": "x", "id": "1"}]}
    assert from_wire(S.NewSessionRequest, new_session).mcp_servers == [
        UnknownVariant("acp", new_session["mcpServers"][0])
    ]
    init = {"protocolVersion": 1, "authMethods": [{"type": "env_var", "id": "k", "name": "Key"}]}
    assert to_wire(from_wire(S.InitializeResponse, init)) == init
    options = {
        "sessionId": "s",
        "configOptions": [{"type": "slider", "id": "t", "name": "Temp", "currentValue": 0.3}],
    }
    assert to_wire(from_wire(S.NewSessionResponse, options)) == options


@pytest.mark.parametrize(
    "cls",
    [
        S.SessionNotification,
        S.PromptRequest,
        S.NewSessionRequest,
        S.InitializeResponse,
        S.NewSessionResponse,
        S.CreateElicitationRequest,
        S.RequestPermissionResponse,
    ],
    ids=lambda c: getattr(c, "__name__", "CreateElicitationRequest"),
)
def test_round_trip_with_unknown_variants_anywhere(cls):
    @settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(strategy(cls, unknown=True))
    def check(obj):
        assert from_wire(cls, to_wire(obj)) == obj

    check()


def test_tag_must_be_a_string_and_present():
    with pytest.raises(SchemaError, match=r"^prompt\[0\]\.type: expected a string, got int$"):
        from_wire(S.PromptRequest, {"sessionId": "s", "prompt": [{"type": 1, "text": "x"}]})
    with pytest.raises(SchemaError, match=r"^prompt\[0\]\.type: missing required field$"):
        from_wire(S.PromptRequest, {"sessionId": "s", "prompt": [{"text": "x"}]})
    with pytest.raises(SchemaError, match=r"^update\.sessionUpdate: missing required field$"):
        from_wire(S.SessionNotification, {"sessionId": "s", "update": {"content": {}}})


# -- strictness ------------------------------------------------------------------------


def _prompt(*blocks, **extra):
    return {"sessionId": "s", "prompt": list(blocks), **extra}


READ = {"sessionId": "s", "path": "/a"}
STDIO = {"name": "n", "command": "c"}
PLAN = {"sessionUpdate": "plan", "entries": [{"content": "c", "priority": "high", "status": None}]}
FORM = {
    "message": "m",
    "sessionId": "s",
    "requestedSchema": {"properties": {"age": {"type": "integer", "minimum": 1.5}}},
}
ANY_CONTENT = "a string, an integer, a number, a boolean or an array of strings"

STRICT_CASES = [
    # primitives
    (S.PromptRequest, {"sessionId": 5, "prompt": []}, "sessionId: expected a string, got int"),
    (S.PromptRequest, {"sessionId": None, "prompt": []}, "sessionId: expected a string, got null"),
    (S.ReadTextFileRequest, {**READ, "line": "5"}, "line: expected an integer, got string"),
    (S.ReadTextFileRequest, {**READ, "line": 5.0}, "line: expected an integer, got float"),
    (S.ReadTextFileRequest, {**READ, "line": True}, "line: expected an integer, got bool"),
    (
        S.InitializeRequest,
        {"protocolVersion": "1"},
        "protocolVersion: expected an integer, got string",
    ),
    (
        S.TerminalOutputResponse,
        {"output": "", "truncated": 1},
        "truncated: expected a boolean, got int",
    ),
    (
        S.TerminalOutputResponse,
        {"output": "", "truncated": "true"},
        "truncated: expected a boolean, got string",
    ),
    (S.Cost, {"amount": True, "currency": "USD"}, "amount: expected a number, got bool"),
    (S.Cost, {"amount": "1.5", "currency": "USD"}, "amount: expected a number, got string"),
    (S.PromptResponse, {"stopReason": 0}, "stopReason: expected a string, got int"),
    (
        S.CancelRequestNotification,
        {"requestId": 1.5},
        "requestId: expected an integer or a string, got float",
    ),
    # containers
    (
        S.PromptRequest,
        {"sessionId": "s", "prompt": {"type": "text"}},
        "prompt: expected an array, got object",
    ),
    (
        S.PromptRequest,
        {"sessionId": "s", "prompt": "hello"},
        "prompt: expected an array, got string",
    ),
    (S.PromptRequest, _prompt(_meta="x"), "_meta: expected an object, got string"),
    (S.PromptRequest, _prompt("hi"), "prompt[0]: expected an object, got string"),
    (
        S.SessionNotification,
        {"sessionId": "s", "update": []},
        "update: expected an object, got array",
    ),
    (S.PromptRequest, [], "expected an object, got array"),
    (S.PromptRequest, None, "expected an object, got null"),
    (S.McpServerStdio, {**STDIO, "args": "x"}, "args: expected an array, got string"),
    (
        S.AuthMethodTerminal,
        {"id": "t", "name": "n", "env": {"A": 1}},
        "env.A: expected a string, got int",
    ),
    # missing fields and paths
    (S.PromptRequest, {"sessionId": "s"}, "prompt: missing required field"),
    (S.CancelRequestNotification, {}, "requestId: missing required field"),
    (
        S.PromptRequest,
        _prompt({"type": "text", "text": 5}),
        "prompt[0].text: expected a string, got int",
    ),
    (
        S.PromptRequest,
        _prompt({"type": "text", "text": "a"}, {"type": "text"}),
        "prompt[1].text: missing required field",
    ),
    (S.McpServerStdio, {**STDIO, "env": [{"name": "A"}]}, "env[0].value: missing required field"),
    (
        S.SessionNotification,
        {"sessionId": "s", "update": PLAN},
        "update.entries[0].status: expected a string, got null",
    ),
    (
        S.PromptRequest,
        _prompt({"type": "resource", "resource": {"uri": "u"}}),
        'prompt[0].resource: expected a resource with "text" or "blob"',
    ),
    (
        S.PromptRequest,
        _prompt({"type": "resource", "resource": {"uri": "u", "blob": 1}}),
        "prompt[0].resource.blob: expected a string, got int",
    ),
    (
        S.CreateFormElicitationRequest,
        FORM,
        "requestedSchema.properties.age.minimum: expected an integer, got float",
    ),
    (
        S.AcceptElicitationResponse,
        {"content": {"tags": ["a", 1]}},
        "content.tags[1]: expected a string, got int",
    ),
    (
        S.AcceptElicitationResponse,
        {"content": {"x": {}}},
        f"content.x: expected {ANY_CONTENT}, got object",
    ),
    # the value of session/set_config_option goes with its type
    (
        S.SetSessionConfigOptionRequest,
        {**CONFIG, "value": True},
        "value: expected a string, got bool",
    ),
    (
        S.SetSessionConfigOptionRequest,
        {**CONFIG, "value": "x", "type": "boolean"},
        "value: expected a boolean, got string",
    ),
    (
        S.SetSessionConfigOptionRequest,
        {**CONFIG, "value": 3, "type": "number"},
        "value: expected a string or a boolean, got int",
    ),
    (
        S.SetSessionConfigOptionRequest,
        {**CONFIG, "value": "3", "type": "number"},
        "type: unsupported config option type 'number'",
    ),
]


@pytest.mark.parametrize(("tp", "data", "message"), STRICT_CASES, ids=[c[2] for c in STRICT_CASES])
def test_strict_json_types(tp, data, message):
    with pytest.raises(SchemaError) as info:
        from_wire(tp, data)
    assert str(info.value) == message
    assert isinstance(info.value, ValueError)


def test_schema_error_exposes_path_and_reason():
    with pytest.raises(SchemaError) as info:
        from_wire(S.PromptRequest, {"sessionId": "s", "prompt": [{"type": "text", "text": 5}]})
    assert info.value.path == ("prompt", 0, "text")
    assert info.value.reason == "expected a string, got int"


def test_numbers_and_open_enums_are_accepted():
    assert from_wire(S.Cost, {"amount": 1, "currency": "EUR"}).amount == 1
    assert from_wire(S.Cost, {"amount": 1.5, "currency": "EUR"}).amount == 1.5
    assert from_wire(S.PromptResponse, {"stopReason": "new_reason"}).stop_reason == "new_reason"
    entry = {"content": "c", "priority": "urgent", "status": "blocked"}
    assert to_wire(from_wire(S.PlanEntry, entry)) == entry


def test_extra_keys_are_ignored():
    req = from_wire(S.PromptRequest, {"sessionId": "s", "prompt": [], "futureField": {"a": 1}})
    assert req == S.PromptRequest(session_id="s", prompt=[])


# -- leniency ------------------------------------------------------------------------


def test_initialize_without_client_capabilities():
    # The official Python SDK's client leaves clientCapabilities out when all are false.
    wire = {"protocolVersion": 1, "clientInfo": {"name": "c", "version": "1"}}
    req = from_wire(S.InitializeRequest, wire)
    assert req.client_capabilities is None
    assert req.client_info == S.Implementation(name="c", version="1")


@pytest.mark.parametrize(
    "server",
    [
        {"name": "fs", "command": "mcp-fs"},
        {"name": "fs", "command": "mcp-fs", "args": None, "env": None},
        {"name": "fs", "command": "mcp-fs", "type": "stdio"},
    ],
)
def test_stdio_mcp_server_without_args_or_env(server):
    decoded = from_wire(S.McpServer, server)
    assert decoded == S.McpServerStdio(name="fs", command="mcp-fs", args=[], env=[])
    assert to_wire(decoded) == {"name": "fs", "command": "mcp-fs", "args": [], "env": []}


def test_session_requests_without_mcp_servers():
    assert from_wire(S.NewSessionRequest, {"cwd": "/w"}).mcp_servers == []
    load = {"cwd": "/w", "sessionId": "s", "mcpServers": None}
    assert from_wire(S.LoadSessionRequest, load).mcp_servers == []
    assert to_wire(S.NewSessionRequest(cwd="/w")) == {"cwd": "/w", "mcpServers": []}


def test_auth_method_spelled_out_as_agent():
    agent = {"type": "agent", "id": "a", "name": "n"}
    assert from_wire(S.AuthMethod, agent) == S.AuthMethodAgent(id="a", name="n")


_EMPTY_OK = sorted(
    {
        spec.result
        for spec in [*S.AGENT_METHODS.values(), *S.CLIENT_METHODS.values()]
        if spec.result is not None
        and attrs.has(spec.result)
        and all(a.default is not attrs.NOTHING for a in attrs.fields(spec.result))
    }
    | {S.LogoutRequest, S.ListSessionsRequest},
    key=lambda c: c.__name__,
)


@pytest.mark.parametrize("cls", _EMPTY_OK, ids=lambda c: c.__name__)
def test_empty_results_decode_from_empty_object_and_null(cls):
    assert from_wire(cls, {}) == cls()
    assert from_wire(cls, None) == cls()


def test_empty_result_classes_include_the_expected_ones():
    names = {c.__name__ for c in _EMPTY_OK}
    assert {
        "WriteTextFileResponse",
        "KillTerminalResponse",
        "ReleaseTerminalResponse",
        "LoadSessionResponse",
        "ResumeSessionResponse",
        "CloseSessionResponse",
        "DeleteSessionResponse",
        "SetSessionModeResponse",
        "AuthenticateResponse",
        "LogoutResponse",
        "WaitForTerminalExitResponse",
    } <= names


def test_select_options_flat_or_grouped():
    option = {"value": "a", "name": "A"}
    flat = {"type": "select", "id": "m", "name": "Model", "currentValue": "a", "options": [option]}
    grouped = {
        **flat,
        "options": [{"group": "g", "name": "G", "options": [option]}],
    }
    assert from_wire(S.SessionConfigOption, flat).options == [S.SessionConfigSelectOption(**option)]
    decoded = from_wire(S.SessionConfigOption, grouped)
    assert isinstance(decoded.options[0], S.SessionConfigSelectGroup)
    assert to_wire(decoded) == grouped


def test_embedded_resource_text_or_blob():
    text = from_wire(S.EmbeddedResourceResource, {"uri": "u", "text": "t"})
    blob = from_wire(S.EmbeddedResourceResource, {"uri": "u", "blob": "YQ=="})
    assert text == S.TextResourceContents(uri="u", text="t")
    assert blob == S.BlobResourceContents(uri="u", blob="YQ==")


def test_permission_outcomes():
    cancelled = {"outcome": {"outcome": "cancelled"}}
    assert (
        from_wire(S.RequestPermissionResponse, cancelled).outcome == S.CancelledPermissionOutcome()
    )
    selected = {"outcome": {"outcome": "selected", "optionId": "allow"}}
    outcome = from_wire(S.RequestPermissionResponse, selected).outcome
    assert outcome == S.SelectedPermissionOutcome(option_id="allow")
    assert to_wire(S.RequestPermissionResponse(outcome=S.CancelledPermissionOutcome())) == {
        "outcome": {"outcome": "cancelled"}
    }


def test_elicitation_modes():
    form = {
        "mode": "form",
        "message": "Who?",
        "sessionId": "s",
        "requestedSchema": {
            "type": "object",
            "properties": {
                "name": {"type": "string", "minLength": 1},
                "tags": {"type": "array", "items": {"anyOf": [{"const": "a", "title": "A"}]}},
                "mood": {"type": "color"},
            },
            "required": ["name"],
        },
    }
    decoded = from_wire(S.CreateElicitationRequest, form)
    assert isinstance(decoded, S.CreateFormElicitationRequest)
    props = decoded.requested_schema.properties
    assert props["name"] == S.StringPropertySchema(min_length=1)
    assert isinstance(props["tags"].items, S.TitledMultiSelectItems)
    assert props["mood"] == UnknownVariant("color", {"type": "color"})
    assert to_wire(decoded) == form
    url = {"mode": "url", "message": "Hi", "requestId": 7, "elicitationId": "e", "url": "https://x"}
    assert to_wire(from_wire(S.CreateElicitationRequest, url)) == url
    accept = {"action": "accept", "content": {"name": "Ada", "n": 3, "ok": True, "tags": ["a"]}}
    assert to_wire(from_wire(S.CreateElicitationResponse, accept)) == accept


def test_mappings_other_than_dict_are_objects_too():
    from collections import OrderedDict

    data = OrderedDict(sessionId="s", prompt=[OrderedDict(type="text", text="hi")])
    assert from_wire(S.PromptRequest, data) == S.PromptRequest(
        session_id="s", prompt=[S.TextContent(text="hi")]
    )


def test_the_cattrs_converter_has_the_same_hooks():
    import cattrs

    block = S.TextContent(text="x", meta={"a": 1})
    assert isinstance(S.converter, cattrs.Converter)
    assert S.converter.unstructure(block) == to_wire(block)
    assert S.converter.structure(to_wire(block), S.ContentBlock) == block
