"""trio-acp's own credential files, and the tool calls that would read them (pure).

`agent_settings.json` holds the model's API key, `agent_server.json` may hold the
agent-server's session key, and `cli_config.json` holds the critic's settings. A tool
call that reads one hands its content to the model, and masking (credentials.py) only
catches the forms of a key it knows how to recognise (`credentials.encoded_forms`):
a compressed or encrypted key, a key cut in two, go through. So such a call is always put to
the user, whatever the approval mode and the "always" rules, with a question that says
what the file holds (confirm.py); the modes that run actions unasked have the SDK stop for
it (sdk.py, `confirmation_setup`).

What counts as reading one, a heuristic that errs on the side of asking:

- a tool given a path (the file editor's `view`, ...) whose path is one of the files;
- a terminal command that names one of the files (its name, with or without a glob in
  it), or that names the directory holding them (`~/.openhands`, `$HOME/.openhands`,
  `$OPENHANDS_PERSISTENCE_DIR`, its absolute path) other than to reach a subdirectory of
  it (`~/.openhands/skills/...`): `cat ~/.openhands/*`, `grep -r key ~/.openhands`.

A command that reaches a file without naming it (a script that builds the path) is not
recognised, and no check could tell every such program: masking remains (README.md, "Your
key stays with the agent"), and, as a boundary, tools run as a user that cannot read the
file (docs/agent-server.md).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path

import attrs

from trio_acp.openhands.translate.shapes import JsonValue
from trio_acp.openhands.translate.tools import rule_scope, tool_family

#: The file names under the persistence directory, and what each holds.
HOLDS: Mapping[str, str] = {
    "agent_settings.json": "the model's API key",
    "agent_server.json": "the agent-server's session API key",
    "cli_config.json": "the critic's settings",
}


@attrs.frozen
class CredentialRead:
    """A tool call that reads a credential file: which file, and what it holds."""

    path: str
    holds: str

    def warning(self) -> str:
        return (
            f"This reads {self.path}, which holds {self.holds}: the model would see it. "
            "Reading trio-acp's credential files is asked every time, whatever the approval "
            "mode and the 'always' rules."
        )


@attrs.frozen
class CredentialFiles:
    """The credential files of one set-up (its persistence directory)."""

    directory: str
    files: tuple[tuple[str, str], ...]  # (absolute path, what it holds)
    home: str = attrs.field(factory=lambda: os.path.expanduser("~"))

    @classmethod
    def under(
        cls, directory: str | os.PathLike[str], extra: Iterable[tuple[str, str]] = ()
    ) -> CredentialFiles:
        base = Path(directory).expanduser()
        files = [(str(base / name), holds) for name, holds in HOLDS.items()]
        files += [(str(Path(p).expanduser()), holds) for p, holds in extra]
        return cls(directory=str(base), files=tuple(dict(files).items()))

    def read_by(
        self, tool: str, args: Mapping[str, JsonValue] | None, cwd: str
    ) -> CredentialRead | None:
        """The credential file this tool call reads, if it reads one."""
        args = args or {}
        if tool_family(tool) == "terminal":
            command = args.get("command")
            return self._named_in(command) if isinstance(command, str) else None
        _, target = rule_scope(tool, dict(args), cwd)
        if isinstance(target, str) and os.path.isabs(target):
            return self._file(target)
        return None

    def _file(self, path: str) -> CredentialRead | None:
        wanted = _real(path)
        for file, holds in self.files:
            if _real(file) == wanted:
                return CredentialRead(file, holds)
        return None

    def _named_in(self, command: str) -> CredentialRead | None:
        for file, holds in self.files:
            if _names_file(command, os.path.basename(file)):
                return CredentialRead(file, holds)
        for spelled in self._directory_spellings():
            for match in re.finditer(re.escape(spelled), command):
                if not _into_subdirectory(command[match.end() :]):
                    first, holds = self.files[0]
                    return CredentialRead(first, holds)
        return None

    def _directory_spellings(self) -> list[str]:
        directory = self.directory.rstrip("/") or "/"
        spellings = {
            directory,
            _real(directory),
            "$OPENHANDS_PERSISTENCE_DIR",
            "${OPENHANDS_PERSISTENCE_DIR}",
        }
        home = self.home.rstrip("/")
        for form in (directory, _real(directory)):
            if home and form.startswith(home + "/"):
                rest = form[len(home) :]
                spellings |= {"~" + rest, "$HOME" + rest, "${HOME}" + rest}
        return sorted(spellings, key=len, reverse=True)


def _real(path: str) -> str:
    try:
        return os.path.realpath(path)
    except (OSError, ValueError):
        return os.path.abspath(path)


def _names_file(command: str, name: str) -> bool:
    """Whether the command names the file: its name, or its stem with a glob
    (`agent_settings*`, `agent_sett*.json`, `agent_?ettings.json`)."""
    if name in command:
        return True
    stem = name.rsplit(".", 1)[0]
    # The first word of the stem, then anything glob-like: `agent_*`, `agent_s*`...
    for word in re.finditer(r"[\w.]*[*?\[][\w.*?\[\]!-]*", command):
        pattern = word.group(0)
        # A glob that names nothing of the file (`*`, `*.json`) is about other files.
        if not any(len(part) >= 3 and part in stem for part in re.split(r"[*?\[\]]", pattern)):
            continue
        try:
            regex = _glob_regex(pattern)
        except re.error:
            continue
        if regex.fullmatch(name) or regex.fullmatch(stem):
            return True
    return False


def _glob_regex(pattern: str) -> re.Pattern[str]:
    out = []
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if c == "*":
            out.append(".*")
        elif c == "?":
            out.append(".")
        elif c == "[":
            end = pattern.find("]", i + 1)
            if end == -1:
                out.append(re.escape(c))
            else:
                body = pattern[i + 1 : end].replace("\\", "\\\\")
                if body.startswith("!"):
                    body = "^" + body[1:]
                out.append(f"[{body}]")
                i = end
        else:
            out.append(re.escape(c))
        i += 1
    return re.compile("".join(out))


def _into_subdirectory(rest: str) -> bool:
    """After the directory's name: `/name/...` or `/name` with a name that is not one of
    the files nor a glob is a path into it that reads none of them."""
    match = re.match(r"/([\w.-]+)(/|$|[\s\"';|&)])", rest)
    if match is None:
        return False
    name = match.group(1)
    return name not in HOLDS and name not in (".", "..")
