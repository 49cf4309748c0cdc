"""The agent's own credentials: withheld from whatever its tools start, masked wherever it writes.

trio-acp holds credentials of its own — the model's API key and the rest of the `LLM_*`
configuration — and runs commands a model chose, in a process that streams what those
commands print to the client and stores it on disk. So:

- **Withheld.** The stdio server takes its own variables (`is_agent_variable`) out of its
  process environment at start-up, before any thread or child process exists, and reads its
  settings from the snapshot it keeps (`withhold_agent_variables`). Terminal commands, MCP
  servers and anything else a tool starts inherit an environment without them. On Linux the
  process's initial environment block — what `/proc/<pid>/environ` shows a child reading its
  parent — is wiped as well, and the process is made non-dumpable, so that other processes of
  the same (non-root) user cannot read its memory or attach a debugger to it.
- **Masked.** The secret values themselves (`secret_values`: the settings' secret fields) are
  replaced by `MASK` wherever they still turn up, once per place they are written to
  (docs/ARCHITECTURE.md#d12): in tool output before the model sees it (the SDK's secret
  registry), in the conversation files, in every frame sent to the client (`mask_bytes`, in
  the connection's writer), in the logs and on stderr (`MaskingFormatter`,
  `MaskingTextStream`); text streamed piece by piece is held back where a secret may be
  split across pieces (`ChunkMask`).

This module imports neither trio nor the SDK.
"""

from __future__ import annotations

import base64
import codecs
import ctypes
import json
import logging
import os
import re
import sys
import threading
from collections import OrderedDict
from collections.abc import Hashable, Iterable, Mapping, MutableMapping
from typing import Any

import attrs

log = logging.getLogger(__name__)

#: What a masked value becomes (the SDK's own marker, so both maskers read alike).
MASK = "<secret-hidden>"
_MASK_BYTES = MASK.encode()
#: Shorter values are not masked: no real credential is that short, and masking a short
#: common string ("scripted", "1234") would garble ordinary text. They are still withheld.
MIN_SECRET_LENGTH = 12

#: Credentials of the agent itself that are not `LLM_*` variables (an agent-server key, say).
AGENT_SECRET_VARIABLES: frozenset[str] = frozenset({"TRIO_ACP_AGENT_SERVER_API_KEY"})

#: The SDK's secret `LLM` fields (`openhands.sdk.llm.llm.LLM_SECRET_FIELDS`).
SECRET_FIELDS = frozenset(
    {"api_key", "aws_access_key_id", "aws_secret_access_key", "aws_session_token"}
)
# Any other field or header named like a credential: `*_key`, `*_token`, `Authorization`...
# ("tokens" does not match: `max_input_tokens` is a number, not a secret).
_SECRET_NAME = re.compile(
    r"(?:^|[_-])(?:key|secret|token|password|passwd|credentials?|authorization|cookie)(?:$|[_-])",
    re.IGNORECASE,
)


def is_agent_variable(name: str) -> bool:
    """Variables that configure the agent itself, and that no process its tools start gets.

    Every `LLM_*` variable: they configure the agent's model, and several hold its
    credentials (the API key, AWS keys, `LLM_EXTRA_HEADERS` with an `Authorization` header,
    a `LLM_BASE_URL` with a token in it); none of them is meant for the user's commands.
    """
    return name.startswith("LLM_") or name in AGENT_SECRET_VARIABLES


def model_key_variables(env: Mapping[str, str]) -> set[str]:
    """`TRIO_ACP_MODELS` itself and the variables its entries take keys from (`api_key_env`):
    the keys of the models a session can switch to are the agent's credentials too."""
    text = env.get("TRIO_ACP_MODELS")
    if not text:
        return set()
    names = {"TRIO_ACP_MODELS"}
    try:
        entries = json.loads(text)
    except ValueError:
        return names  # a comma list of model names: no key variables
    for entry in entries if isinstance(entries, list) else []:
        if isinstance(entry, dict) and isinstance(entry.get("api_key_env"), str):
            names.add(entry["api_key_env"])
    return names


def is_secret_field(name: str) -> bool:
    """Whether a settings field (or a header inside one) holds a credential."""
    return name.lower() in SECRET_FIELDS or bool(_SECRET_NAME.search(name))


def secret_values(fields: Mapping[str, Any]) -> set[str]:
    """The credential values among the model's settings (`LLM` field name → value).

    Header maps (`extra_headers`, also as the JSON text of `LLM_EXTRA_HEADERS`) are searched
    by header name; an `Authorization: Bearer <token>` header gives the token too.
    """
    found: set[str] = set()

    def collect(name: str, value: Any) -> None:
        if isinstance(value, str) and value.lstrip().startswith("{"):
            try:
                value = json.loads(value)
            except ValueError:
                pass
        if isinstance(value, Mapping):
            for key, item in value.items():
                collect(str(key), item)
        elif isinstance(value, str) and is_secret_field(name):
            found.update({value, value.strip(), *value.split()[-1:]})

    for name, value in fields.items():
        collect(str(name), value)
    return {v for v in found if len(v) >= MIN_SECRET_LENGTH}


# --- withholding -------------------------------------------------------------------------


def withhold_agent_variables(environ: MutableMapping[str, str] | None = None) -> dict[str, str]:
    """Take the agent's own variables out of the process environment; return the snapshot.

    The snapshot is the whole environment as it was: the agent reads its settings from it
    from then on. Call this once, in the server's entry point, before any thread or child
    process starts (a child started earlier keeps what it inherited). For the real process
    environment (the default) on Linux, the initial environment block is wiped too and the
    process made non-dumpable.
    """
    real = environ is None
    env = os.environ if environ is None else environ
    snapshot = dict(env)
    names = [name for name in env if is_agent_variable(name) or name in model_key_variables(env)]
    for name in names:
        del env[name]  # os.environ: unsetenv() too, so children never inherit it
    if real and sys.platform.startswith("linux"):
        _wipe_initial_environment(set(names))
        _make_non_dumpable()
    return snapshot


def _wipe_initial_environment(names: set[str]) -> None:
    """Overwrite the withheld variables in the environment block the kernel shows as
    `/proc/<pid>/environ` (unsetenv() only drops the pointers to it; the text stays)."""
    if not names:
        return
    try:
        with open("/proc/self/stat", "rb") as f:
            stat = f.read()
        # Fields after the command name, which is in parentheses and may hold anything;
        # env_start and env_end are fields 50 and 51 (proc(5)), the first here is field 3.
        fields = stat[stat.rindex(b")") + 2 :].split()
        start, end = int(fields[50 - 3]), int(fields[51 - 3])
        if not 0 < start < end:
            return
        wanted = {os.fsencode(name) for name in names}
        offset = 0
        for entry in ctypes.string_at(start, end - start).split(b"\0"):
            name, eq, value = entry.partition(b"=")
            if eq and name in wanted:
                # Keep `NAME=`, zero the value: nothing points here any more (unsetenv).
                ctypes.memset(start + offset + len(name) + 1, 0, len(value))
            offset += len(entry) + 1
    except Exception:  # best effort: the variables are gone from the environment anyway
        log.debug("could not wipe the initial environment block", exc_info=True)


def _make_non_dumpable() -> None:
    """PR_SET_DUMPABLE 0: other processes of the user (the agent's own children included)
    can no longer read this process's memory or environment, nor ptrace it; root still can."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(4, 0, 0, 0, 0) != 0:  # PR_SET_DUMPABLE = 4
            log.debug("prctl(PR_SET_DUMPABLE) failed: errno %d", ctypes.get_errno())
    except Exception:
        log.debug("could not make the process non-dumpable", exc_info=True)


# --- masking -----------------------------------------------------------------------------


@attrs.frozen
class _Compiled:
    forms: tuple[str, ...] = ()  # longest first
    byte_forms: tuple[bytes, ...] = ()
    pattern: re.Pattern[str] | None = None  # for positions (ChunkMask)
    values: tuple[str, ...] = ()
    # What a stream may hold back as a possible start (ChunkMask): the values and their
    # reversed forms. The other encoded forms reach the model only masked (the SDK's
    # registry gets every form), so its text can hardly stream one; holding on all of
    # them cost ~6x per chunk (bench/credentials_masking.py). A whole form in one frame
    # is masked all the same.
    held: tuple[str, ...] = ()
    max_length: int = 0
    # What `mask` and `mask_bytes` search for one by one: the forms but the base64 ones,
    # which they search in the text without its line ends (`_Wrapped`).
    searched: tuple[str, ...] = ()
    byte_searched: tuple[bytes, ...] = ()
    base64: tuple[_Wrapped, ...] = ()


class _Wrapped:
    """A key's base64 characters (`_base64_runs`), whole or wrapped across lines.

    `base64` wraps its output at 76 characters, `openssl base64` at 64, and a line end may
    then cut the key's characters anywhere: a form for each place would be dozens to search
    in every frame. Text with no line end in it (no backslash, for JSON text) is searched
    for the whole run, as any other form. Otherwise for two pieces of it side by side
    (`triggers`), the halves of its first 64 characters: lines are at least 64 long, so a
    line end cuts at most one of them, and the other is whole in every form. Where one is
    found, the run is masked by a pattern that allows a line end between any two characters
    (compiled when first needed: it is rare). (Pieces as long as they can be: a search for
    a short one costs more, up to 9x for 6 characters against 30.)
    """

    def __init__(self, run: str) -> None:
        self.run = run
        self.byte_run = run.encode()
        self.triggers = _triggers(run)
        self.byte_triggers = tuple(t.encode() for t in self.triggers)
        self._pattern: re.Pattern[str] | None = None
        self._byte_pattern: re.Pattern[bytes] | None = None

    def pattern(self) -> re.Pattern[str]:
        if self._pattern is None:
            end = "(?:\r?\n|(?:\\\\r)?\\\\n)?"  # a line end, as text or in JSON text
            self._pattern = re.compile(end.join(map(re.escape, self.run)))
        return self._pattern

    def byte_pattern(self) -> re.Pattern[bytes]:
        if self._byte_pattern is None:
            self._byte_pattern = re.compile(self.pattern().pattern.encode())
        return self._byte_pattern


def _triggers(run: str) -> tuple[str, str]:
    """The two halves of the run's first 64 characters (of all of it, if shorter)."""
    half = min(len(run), 64) // 2
    return run[:half], run[half : 2 * half]


def _base64_runs(value: str) -> set[str]:
    """The key's base64 characters at each of the three byte offsets it may start at in
    what was encoded (a key inside a whole file's encoding), standard and URL-safe. Only
    the characters fully determined by the key are kept, so a run matches whatever
    surrounds the key."""
    raw = value.encode()
    runs: set[str] = set()
    for offset in range(3):
        padded = b"\0" * offset + raw + b"\0\0"
        # Base64 character i carries bits [6i, 6i + 6): keep those inside the value's bits.
        start, end = -(-8 * offset // 6), 8 * (offset + len(raw)) // 6
        for encode in (base64.b64encode, base64.urlsafe_b64encode):
            runs.add(encode(padded).decode("ascii")[start:end])
    return runs


def encoded_forms(value: str) -> set[str]:
    """The value as a command can print it without printing it: reversed (`rev`), rot13
    (`tr A-Za-z N-ZA-Mn-za-m`), base64 (`base64`, standard and URL-safe, at each of the three
    byte offsets it may start at in what was encoded: `_base64_runs`), hex (`xxd -p`,
    `od`-less `hexdump`), and one character at a time (spaced out, or one per line).

    Base64 wrapped across lines (`base64` wraps at 76 characters) is masked too, by
    `SecretValues` (`_Wrapped`). Not covered: any other transformation (compression,
    encryption, a key cut in pieces by a script): those are the reason reading the files
    that hold a key is always asked (`openhands/permissions/credential_files.py`).
    """
    raw = value.encode()
    forms = {value[::-1], codecs.encode(value, "rot13"), raw.hex(), raw.hex().upper()}
    forms |= {" ".join(value), "\n".join(value), *_base64_runs(value)}
    return {f for f in forms if len(f) >= MIN_SECRET_LENGTH}


def _forms(value: str) -> set[str]:
    # The value and its encoded forms, each also as it reads inside JSON text (frames,
    # conversation files, logged JSON).
    out: set[str] = set()
    for form in {value} | encoded_forms(value):
        out |= {form, json.dumps(form)[1:-1], json.dumps(form, ensure_ascii=False)[1:-1]}
    return out


class SecretValues:
    """The values to mask, shared by everything that writes; thread-safe, and only grows.

    The agent adds the secret values of its settings each time it reads them, so a key
    that arrives with a new settings file is masked from then on.
    """

    def __init__(self, values: Iterable[str] = ()) -> None:
        self._lock = threading.Lock()
        self._compiled = _Compiled()
        self.add(values)

    def add(self, values: Iterable[str]) -> None:
        new = {v for v in values if isinstance(v, str) and len(v) >= MIN_SECRET_LENGTH}
        with self._lock:
            known = set(self._compiled.values)
            if new <= known:
                return
            every = known | new
            forms = sorted({f for v in every for f in _forms(v)}, key=len, reverse=True)
            # (Base64 needs no escaping inside JSON text: its forms are the runs alone.)
            runs = {r for v in every for r in _base64_runs(v) if len(r) >= MIN_SECRET_LENGTH}
            searched = tuple(f for f in forms if f not in runs)
            # Longest first: a value that contains a shorter one is masked whole.
            self._compiled = _Compiled(
                forms=tuple(forms),
                byte_forms=tuple(f.encode() for f in forms),
                pattern=re.compile("|".join(map(re.escape, forms))),
                values=tuple(sorted(every, key=len, reverse=True)),
                held=tuple(sorted({f for v in every for f in (v, v[::-1])}, key=len, reverse=True)),
                max_length=max(len(f) for f in forms),
                searched=searched,
                # JSON text holds no raw line end but between values: not the one-per-line
                # form (its JSON form is searched).
                byte_searched=tuple(f.encode() for f in searched if "\n" not in f),
                base64=tuple(_Wrapped(r) for r in sorted(runs, key=len, reverse=True)),
            )

    @property
    def values(self) -> tuple[str, ...]:
        return self._compiled.values

    @property
    def forms(self) -> tuple[str, ...]:
        """Every form masked: the values, encoded (`encoded_forms`), and inside JSON text
        (not base64 wrapped across lines, which only `mask` and `mask_bytes` find)."""
        return self._compiled.forms

    # One str.replace per form: a fast substring search each, where a regex alternation
    # tries every form at every position (bench/credentials_masking.py).
    def mask(self, text: str) -> str:
        compiled = self._compiled
        for form in compiled.searched:
            text = text.replace(form, MASK)
        if not compiled.base64:
            return text
        lines = text.find("\n") != -1 or text.find("\\") != -1
        for wrapped in compiled.base64:
            if not lines:
                text = text.replace(wrapped.run, MASK)
            elif any(text.find(t) != -1 for t in wrapped.triggers):
                text = wrapped.pattern().sub(MASK, text)
        return text

    def mask_bytes(self, data: bytes) -> bytes:
        """`mask` for JSON text (frames, journal lines): a line end inside a value is
        escaped, so the forms with a raw one are not searched, and text without a
        backslash holds no wrapped base64 (a raw line end only ends a frame)."""
        compiled = self._compiled
        for form in compiled.byte_searched:
            data = data.replace(form, _MASK_BYTES)
        if not compiled.base64:
            return data
        # (`find`, not `in`: `in` on bytes first tries its operand as an integer: slower.)
        lines = data.find(b"\\") != -1
        for wrapped in compiled.base64:
            if not lines:
                data = data.replace(wrapped.byte_run, _MASK_BYTES)
            elif any(data.find(t) != -1 for t in wrapped.byte_triggers):
                data = wrapped.byte_pattern().sub(_MASK_BYTES, data)
        return data


class ChunkMask:
    """Holds back what a secret split across streamed pieces needs, one stream per key
    (a message id); the connection's writer masks every whole secret (docs/ARCHITECTURE.md#d12).

    A secret may be split across pieces, and each piece goes out in a frame of its own, where
    no single frame holds the whole secret. Per stream this holds back a tail that may be
    the start of one — at least `HOLD` characters of it — so that the secret, once the rest
    comes, goes out whole in one piece; and it remembers the tail of the text already
    released, so that a secret whose start went out anyway (a start shorter than `HOLD`, or
    an encoded form, which is not held) has the rest of it masked here. Whole secrets inside
    a piece are left to the writer. `release()` hands back what is held when no more text
    may come (the turn ends, a permission request goes out). Each piece is scanned with at
    most the longest secret's length of context: linear in the text, with no per-piece cost
    at all while there is nothing to mask.
    """

    HOLD = 4
    MAX_STREAMS = 64

    def __init__(self, secrets: SecretValues) -> None:
        self._secrets = secrets
        self._held: dict[Hashable, str] = {}
        self._tails: OrderedDict[Hashable, str] = OrderedDict()

    def feed(self, key: Hashable, text: str) -> str:
        """The part of `text` (after what this stream held) that can be released now, with
        the rest of a secret that began in released text masked."""
        compiled = self._secrets._compiled
        if compiled.pattern is None:
            return self._held.pop(key, "") + text
        buf = self._held.pop(key, "") + text
        tail = self._tails.pop(key, "")
        window = tail + buf
        out: list[str] = []
        pos = 0  # in buf
        scanned = 0  # in window: where the last secret found ends
        for match in compiled.pattern.finditer(window):
            scanned = match.end()
            if match.end() <= len(tail) or match.start() >= len(tail):
                # Wholly released already, or wholly in this piece: the writer masks it.
                continue
            # Its start went out with the text before: mask the rest.
            out.append(MASK)
            pos = match.end() - len(tail)
        # A secret may be starting at the end, possibly in what was already released.
        hold = min(_held_suffix(window[scanned:], compiled.held, self.HOLD), len(buf) - pos)
        release_upto = len(buf) - hold
        out.append(buf[pos:release_upto])
        if hold:
            self._held[key] = buf[release_upto:]
        self._tails[key] = (tail + buf[:release_upto])[-compiled.max_length :]
        while len(self._tails) > self.MAX_STREAMS:
            self._tails.popitem(last=False)
        return "".join(out)

    def holding(self, key: Hashable) -> bool:
        return key in self._held

    def release(self) -> list[tuple[Hashable, str]]:
        """Everything held back, per stream (a partial secret: the rest never came)."""
        held, self._held = self._held, {}
        return list(held.items())


def _held_suffix(text: str, values: tuple[str, ...], minimum: int) -> int:
    """The length of the longest end of `text` that begins some value (0 if under `minimum`)."""
    best = 0
    for value in values:
        i = text.find(value[0], max(len(text) - len(value) + 1, 0))
        while i != -1:
            length = len(text) - i
            if length <= best:
                break
            if value.startswith(text[i:]):
                best = length
                break
            i = text.find(value[0], i + 1)
    return best if best >= minimum else 0


class UpdateMask:
    """A session's outbound updates with `ChunkMask` applied to streamed message/thought text.

    The only masking done per update: what a secret split across chunks needs, which no
    single frame contains. Whole values in any update are masked by the connection's
    writer, in the frame (`trio_acp.rpc.open_peer`'s ``mask``).
    """

    def __init__(self, secrets: SecretValues) -> None:
        self._chunks = ChunkMask(secrets)
        self._held: dict[Hashable, Any] = {}  # stream key → the last chunk, for its shape
        # Imported here, not at the top: the warm-start launcher imports this module and
        # must start fast (schema pulls in cattrs; see warm.py).
        from . import schema

        self._chunk_types = (schema.AgentMessageChunk, schema.AgentThoughtChunk)
        self._text_content = schema.TextContent

    def apply(self, updates: list[Any], *, release: bool = False) -> list[Any]:
        out: list[Any] = []
        for update in updates:
            if isinstance(update, self._chunk_types) and isinstance(
                update.content, self._text_content
            ):
                key = (type(update).__name__, update.message_id)
                text = self._chunks.feed(key, update.content.text)
                if self._chunks.holding(key):
                    self._held[key] = update
                if text:
                    out.append(_with_text(update, text))
            else:
                out.append(update)
        if release:
            for held_key, text in self._chunks.release():
                update = self._held.pop(held_key, None)
                if update is not None and text:
                    out.append(_with_text(update, text))
            self._held.clear()
        return out


def _with_text(update: Any, text: str) -> Any:
    if text == update.content.text:
        return update
    return attrs.evolve(update, content=attrs.evolve(update.content, text=text))


class MaskingTextStream:
    """A text stream (`sys.stderr`) with the secret values masked in what is written: for
    what reaches it without logging — a thread's traceback, a warning, a library's print."""

    def __init__(self, inner: Any, secrets: SecretValues) -> None:
        self._inner = inner
        self._secrets = secrets

    def write(self, text: str) -> int:
        self._inner.write(self._secrets.mask(text))
        return len(text)

    def writelines(self, lines: Iterable[str]) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class MaskingFormatter(logging.Formatter):
    """A log formatter that masks the secret values in the whole formatted record
    (message, arguments, traceback)."""

    def __init__(self, secrets: SecretValues, fmt: str | None = None) -> None:
        super().__init__(fmt)
        self.secrets = secrets

    def format(self, record: logging.LogRecord) -> str:
        return self.secrets.mask(super().format(record))
