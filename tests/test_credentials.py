"""The agent's credentials: which variables are withheld, which values are masked, and how
(see tests/e2e/test_secrets_canary.py for the whole agent under attack)."""

from __future__ import annotations

import base64
import io
import json
import logging
import random
import re
import subprocess
import sys
import textwrap

import pytest

from trio_acp import schema
from trio_acp.credentials import (
    MASK,
    ChunkMask,
    MaskingFormatter,
    MaskingTextStream,
    SecretValues,
    UpdateMask,
    is_agent_variable,
    is_secret_field,
    secret_values,
    withhold_agent_variables,
)

KEY = "sk-test-0123456789abcdefghij"


def test_which_variables_and_fields_are_the_agents_credentials():
    assert all(
        is_agent_variable(n) for n in ["LLM_API_KEY", "LLM_MODEL", "LLM_AWS_SECRET_ACCESS_KEY"]
    )
    assert not any(is_agent_variable(n) for n in ["PATH", "OPENAI_API_KEY", "TRIO_ACP_LOG_LEVEL"])
    # The agent-server's key is the agent's own too: withheld from tools like LLM_API_KEY.
    assert is_agent_variable("TRIO_ACP_AGENT_SERVER_API_KEY")
    assert not is_agent_variable("TRIO_ACP_AGENT_SERVER_URL")
    for name in [
        "api_key",
        "aws_access_key_id",
        "aws_secret_access_key",
        "aws_session_token",
        "Authorization",
        "x-api-key",
        "openrouter_token",
        "password",
    ]:
        assert is_secret_field(name), name
    for name in [
        "model",
        "base_url",
        "max_input_tokens",
        "max_output_tokens",
        "auth_type",
        "custom_tokenizer",
        "num_retries",
    ]:
        assert not is_secret_field(name), name


def test_secret_values_come_from_secret_fields_and_auth_headers():
    fields = {
        "model": "openai/some-long-model-name",
        "api_key": KEY,
        "aws_secret_access_key": "aws-secret-0123456789",
        "extra_headers": json.dumps(
            {"Authorization": "Bearer tok-0123456789abcdef", "X-Trace": "not-a-secret-value"}
        ),
        "max_input_tokens": "128000000000000",
        "seed": "short",
    }
    assert secret_values(fields) == {
        KEY,
        "aws-secret-0123456789",
        "Bearer tok-0123456789abcdef",
        "tok-0123456789abcdef",
    }
    # Too short to be a credential, and masking it would garble text ("openai/scripted").
    assert secret_values({"api_key": "scripted"}) == set()


def test_withholding_takes_llm_variables_out_and_keeps_a_snapshot():
    env = {"LLM_API_KEY": KEY, "LLM_MODEL": "m", "PATH": "/bin", "HOME": "/h"}
    snapshot = withhold_agent_variables(env)
    assert env == {"PATH": "/bin", "HOME": "/h"}
    assert snapshot == {"LLM_API_KEY": KEY, "LLM_MODEL": "m", "PATH": "/bin", "HOME": "/h"}


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc and prctl are Linux's")
def test_children_find_the_key_neither_inherited_nor_in_their_parents_environ():
    # A fresh process, as `trio-acp` starts: the key in its initial environment block.
    # Non-dumpable is checked apart: it also hides the block from non-root children, and
    # this test must see that the block itself no longer holds the key.
    script = textwrap.dedent(
        """
        import ctypes, subprocess
        from trio_acp import credentials
        make_non_dumpable, credentials._make_non_dumpable = credentials._make_non_dumpable, lambda: None
        snapshot = credentials.withhold_agent_variables()
        assert snapshot["LLM_API_KEY"].startswith("sk-test-")
        print(subprocess.run(
            ["sh", "-c", "printenv LLM_API_KEY; tr '\\\\0' '\\\\n' < /proc/$PPID/environ"],
            capture_output=True, text=True, check=True,
        ).stdout)
        make_non_dumpable()
        print("dumpable:", ctypes.CDLL(None).prctl(3, 0, 0, 0, 0))  # PR_GET_DUMPABLE
        """
    )
    env = {"LLM_API_KEY": KEY, "LLM_MODEL": "m", "PATH": "/usr/bin:/bin", "MARKER": "still-here"}
    out = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True
    ).stdout
    assert "MARKER=still-here" in out  # the parent's environment block was read
    assert "LLM_API_KEY=" in out.splitlines()  # the variable is there, its value is not
    assert KEY not in out and KEY[8:] not in out
    assert "dumpable: 0" in out


def test_masking_text_bytes_and_json_forms():
    quoted = 'pa"ss\\word-0123456789'
    secrets = SecretValues([KEY, quoted, "short"])
    assert secrets.mask(f"key={KEY}.") == f"key={MASK}."
    frame = json.dumps({"text": f"{KEY} and {quoted}"}).encode()
    assert json.loads(secrets.mask_bytes(frame)) == {"text": f"{MASK} and {MASK}"}
    assert secrets.mask("short") == "short"
    assert SecretValues().mask_bytes(frame) == frame
    # The longer of two overlapping values is masked whole.
    both = SecretValues([KEY, KEY + "-and-more"])
    assert both.mask(KEY + "-and-more!") == MASK + "!"


def _stream(mask: ChunkMask, pieces: list[str]) -> str:
    # Each piece released goes out in a frame of its own, which the connection's writer
    # masks (`SecretValues.mask`): the key must be in none of them, nor in their join.
    secrets = mask._secrets
    out = "".join(secrets.mask(mask.feed("m", p)) for p in pieces)
    out += "".join(secrets.mask(text) for _, text in mask.release())
    assert KEY not in out
    # Fewer than HOLD leading characters ("sk-") may go out before the rest is known.
    for length in range(ChunkMask.HOLD - 1, 0, -1):
        out = out.replace(KEY[:length] + MASK, MASK)
    return out


def test_a_key_split_across_chunks_is_masked_at_every_split_point():
    secrets = SecretValues([KEY])
    text = f"The key is {KEY}, twice: {KEY}. Done."
    expected = f"The key is {MASK}, twice: {MASK}. Done."
    for cut in range(len(text) + 1):
        assert _stream(ChunkMask(secrets), [text[:cut], text[cut:]]) == expected, cut
    rng = random.Random(7)
    for _ in range(300):
        cuts = sorted(rng.sample(range(1, len(text)), rng.randint(1, 20)))
        pieces = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True)]
        assert _stream(ChunkMask(secrets), pieces) == expected, pieces


def test_chunks_are_released_at_once_unless_they_may_start_a_key():
    mask = ChunkMask(SecretValues([KEY]))
    assert mask.feed("m", "results") == "results"  # ends in "s", not held
    assert mask.feed("m", " then sk-te") == " then "  # the start of the key: held
    assert mask.feed("m", "acher") == "sk-teacher"  # not the key after all
    assert mask.feed("m", "sk-test-01") == ""
    assert mask.release() == [("m", "sk-test-01")]  # the turn ended: what was held goes out
    unmasked = ChunkMask(SecretValues())
    assert unmasked.feed("m", "sk-test-01") == "sk-test-01"


def test_update_mask_masks_streamed_chunks_and_releases_on_flush():
    secrets = SecretValues([KEY])
    mask = UpdateMask(secrets)

    def chunk(cls, text, mid="m1"):
        return cls(content=schema.TextContent(text=text), message_id=mid)

    first = mask.apply([chunk(schema.AgentMessageChunk, "key: " + KEY[:10])])
    second = mask.apply(
        [
            chunk(schema.AgentMessageChunk, KEY[10:] + " ok"),
            chunk(schema.AgentThoughtChunk, "hmm sk-tes", "t1"),
        ],
        release=True,
    )
    texts = [(type(u).__name__, u.content.text) for u in first + second]
    assert texts == [
        ("AgentMessageChunk", "key: "),
        # Held until whole, in one update: its frame is masked by the connection's writer.
        ("AgentMessageChunk", KEY + " ok"),
        ("AgentThoughtChunk", "hmm "),
        ("AgentThoughtChunk", "sk-tes"),  # released with the flush, as a thought of t1
    ]
    assert second[-1].message_id == "t1"


def test_log_records_are_masked_arguments_and_tracebacks_too():
    secrets = SecretValues()
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(MaskingFormatter(secrets, "%(message)s"))
    logger = logging.getLogger("test_credentials.masked")
    logger.addHandler(handler)
    logger.propagate = False
    try:
        secrets.add([KEY])  # added after the handler was made: it is the same set
        logger.warning("calling with %s", KEY)
        try:
            raise RuntimeError(f"rejected {KEY}")
        except RuntimeError:
            logger.exception("failed")
    finally:
        logger.removeHandler(handler)
    assert KEY not in stream.getvalue()
    assert stream.getvalue().count(MASK) == 2


def test_stderr_writes_are_masked():
    inner = io.StringIO()
    stream = MaskingTextStream(inner, SecretValues([KEY]))
    print(f"Traceback: rejected {KEY}", file=stream)
    stream.writelines([KEY, "\n"])
    stream.flush()
    assert inner.getvalue() == f"Traceback: rejected {MASK}\n{MASK}\n"


def test_the_keys_of_other_models_are_withheld_too():
    # TRIO_ACP_MODELS entries may take their key from a variable of their own; that key is
    # the agent's credential as much as LLM_API_KEY is.
    models = '[{"model": "anthropic/claude", "api_key_env": "ANTHROPIC_API_KEY"}, "openai/gpt-5"]'
    env = {
        "TRIO_ACP_MODELS": models,
        "ANTHROPIC_API_KEY": "sk-ant-0123456789abcdef",
        "HOME": "/home/u",
    }
    snapshot = withhold_agent_variables(env)
    assert env == {"HOME": "/home/u"}
    assert snapshot["ANTHROPIC_API_KEY"] == "sk-ant-0123456789abcdef"
    plain = {"TRIO_ACP_MODELS": "openai/gpt-5,openai/gpt-5-mini", "OPENAI_API_KEY": "x"}
    withhold_agent_variables(plain)
    assert plain == {"OPENAI_API_KEY": "x"}  # not named by the agent's settings: the user's


def test_encoded_forms_of_a_key_are_masked_wherever_they_sit():
    """What `rev`, `base64`, `xxd -p` or a spacing `sed` print of a key (23.4b): masked in
    text, in JSON frames, and at any byte offset of a base64 stream (a whole file encoded)."""
    import base64

    secrets = SecretValues([KEY])
    raw = KEY.encode()
    printed = {
        "reversed": KEY[::-1],
        "hex": raw.hex(),
        "HEX": raw.hex().upper(),
        "spaced": " ".join(KEY),
        "one per line": "\n".join(KEY),
    }
    for prefix in (b"", b"{", b'{"', b'{"api_key": "'):
        encoded = base64.b64encode(prefix + raw + b'"}')
        printed[f"base64 after {prefix!r}"] = encoded.decode()
        printed[f"urlsafe base64 after {prefix!r}"] = base64.urlsafe_b64encode(
            prefix + raw
        ).decode()
    for name, text in printed.items():
        masked = secrets.mask(f"out: {text} :end")
        assert MASK in masked, name
        assert text not in masked, name
        frame = json.dumps({"text": text}).encode()
        assert MASK.encode() in secrets.mask_bytes(frame), name
    # Ordinary text is left alone.
    assert secrets.mask("results: 0 failed") == "results: 0 failed"


def _wrapped(data: bytes, width: int, end: str) -> str:
    encoded = base64.b64encode(data).decode()
    return end.join(encoded[i : i + width] for i in range(0, len(encoded), width)) + end


def _decodes_to(text: str, piece: bytes) -> bool:
    """Whether `piece` decodes from a run of base64 in `text` (line ends taken out), at
    any of its 4 alignments."""
    for end in ("\\r", "\\n", "\r", "\n"):
        text = text.replace(end, "")
    for run in re.findall(r"[A-Za-z0-9+/]{8,}", text):
        for start in range(4):
            chars = run[start:]
            if piece in base64.b64decode(chars[: len(chars) // 4 * 4]):
                return True
    return False


@pytest.mark.parametrize("key", [KEY, "sk-proj-" + "Ab1_xY9-" * 20])  # 28, 168 characters
def test_a_key_in_base64_wrapped_across_lines_is_masked(key):
    """As `base64` prints a file (76 characters a line) and `openssl base64` (64), with
    Unix or Windows line ends, the key at every place in a line: in text (logs, stderr), in
    JSON text as `mask` sees it (conversation files) and in a frame (`mask_bytes`)."""
    secrets = SecretValues([key])
    middle = key[len(key) // 3 : 2 * len(key) // 3].encode()
    for width in (76, 64):
        for end in ("\n", "\r\n"):
            for before in range(width * 3 // 4 + 3):  # every place, at each byte offset
                printed = _wrapped(
                    b"x" * before + b'{"api_key": "' + key.encode() + b'"}', width, end
                )
                assert _decodes_to(printed, middle)
                frame = json.dumps({"text": printed})
                for masked in (
                    secrets.mask(printed),
                    secrets.mask(frame),
                    secrets.mask_bytes(frame.encode()).decode(),
                ):
                    assert MASK in masked, (width, end, before)
                    assert not _decodes_to(masked, middle), (width, end, before)


def test_base64_wrapped_across_lines_without_the_key_is_left_alone():
    secrets = SecretValues([KEY])
    printed = _wrapped(bytes(range(256)) * 4 + KEY[:-1].encode(), 76, "\n")
    frame = json.dumps({"text": printed}).encode()
    assert secrets.mask(printed) == printed
    assert secrets.mask_bytes(frame) == frame


def test_a_key_in_rot13_is_masked():
    """What `tr A-Za-z N-ZA-Mn-za-m` prints of it."""
    secrets = SecretValues([KEY])
    rot13 = KEY.translate(
        str.maketrans(
            "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz",
            "NOPQRSTUVWXYZABCDEFGHIJKLMnopqrstuvwxyzabcdefghijklm",
        )
    )
    assert secrets.mask(f"out: {rot13}") == f"out: {MASK}"
    frame = json.dumps({"text": f"{rot13}\n"}).encode()
    assert secrets.mask_bytes(frame) == json.dumps({"text": f"{MASK}\n"}).encode()


def test_an_encoded_key_split_across_chunks_is_masked():
    reversed_key = KEY[::-1]
    text = f"It is {reversed_key} backwards."
    for cut in range(len(text) + 1):
        secrets = SecretValues([KEY])
        mask = ChunkMask(secrets)
        # Each piece in a frame of its own, masked by the writer (`_stream`).
        out = secrets.mask(mask.feed("m", text[:cut])) + secrets.mask(mask.feed("m", text[cut:]))
        out += "".join(secrets.mask(t) for _, t in mask.release())
        # At most the first HOLD - 1 characters go out before the rest is known (_stream).
        for length in range(ChunkMask.HOLD - 1, 0, -1):
            out = out.replace(reversed_key[:length] + MASK, MASK)
        assert out == f"It is {MASK} backwards.", cut
