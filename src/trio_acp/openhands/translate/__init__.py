"""OpenHands SDK events and LLM stream chunks -> ACP `session/update` payloads.

One concern per module, all pure (no trio, no `openhands.*`, no litellm):

* `translator` — the per-session `Translator` (which calls were announced, each event's updates);
* `streams` — the text streamed per LLM response, what its durable event still adds, message ids;
* `tools` — the tool catalog: how each tool looks (title, kind, locations, permission
  preview, rule scope, result);
* `args` — a tool call's arguments, streamed (`ArgScanner`) or finished (`tool_arguments`);
* `results` — a finished tool call's observation as content;
* `content` — ACP content blocks, and reading the SDK's content duck-typed;
* `text` — size caps, ANSI stripping, Markdown fences, `one_line`;
* `paths` — `file://` URIs and paths, POSIX and Windows;
* `updates` — folding and coalescing lists of updates;
* `interruptions` — the notes of a cancelled or cut-short turn, and how a replay shows them.
"""

from __future__ import annotations

from trio_acp.openhands.translate.args import ArgScanner, tool_arguments
from trio_acp.openhands.translate.content import tool_locations
from trio_acp.openhands.translate.paths import (
    abs_path,
    file_uri_to_path,
    local_path,
    path_to_file_uri,
)
from trio_acp.openhands.translate.streams import message_id
from trio_acp.openhands.translate.text import (
    MAX_RAW_STRING_BYTES,
    MAX_TEXT_BYTES,
    one_line,
    strip_ansi,
)
from trio_acp.openhands.translate.tools import permission_preview, present, rule_scope, tool_family
from trio_acp.openhands.translate.translator import Translator, conversation_error
from trio_acp.openhands.translate.updates import coalesce

__all__ = [
    "MAX_RAW_STRING_BYTES",
    "MAX_TEXT_BYTES",
    "ArgScanner",
    "Translator",
    "abs_path",
    "coalesce",
    "conversation_error",
    "file_uri_to_path",
    "local_path",
    "message_id",
    "one_line",
    "path_to_file_uri",
    "permission_preview",
    "present",
    "rule_scope",
    "strip_ansi",
    "tool_arguments",
    "tool_family",
    "tool_locations",
]
