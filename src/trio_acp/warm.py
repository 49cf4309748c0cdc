"""Warm start: a fork server that has imported the SDK, and the launcher that attaches to it.

Importing the OpenHands SDK costs seconds (litellm alone most of them), and every process an
editor launches pays it before its first `session/new`. A *warm server* (`trio-acp warm
start`) imports it once and waits on a Unix socket. A new `trio-acp` process (the
*launcher*) connects, passes its own stdin/stdout/stderr over the socket (SCM_RIGHTS) with
its argv, cwd, umask and environment, and the server forks a *child* that serves ACP on
those very fds, exactly as the launcher would have. The launcher stays as the client's
process: it relays SIGTERM/SIGINT/SIGHUP to the child and exits with the child's status.

Lifecycle and safety (see README "Warm start"):

- The server forks only while it is single-threaded (importing the SDK starts no thread;
  checked before every fork), and never runs Trio itself; each child starts its own.
- The child takes the launcher's environment, cwd and umask, then runs the ordinary start-up
  (`cli.main`), which withholds the `LLM_*` variables as usual. The server drops the agent's
  variables from its own environment at start and is non-dumpable.
- The launch is refused — and the launcher starts the ordinary way, in-process — when the
  server's package (version or any file of trio_acp, the SDK's version, the interpreter)
  differs from the launcher's, or when the variables read at import time (`LITELLM_*`,
  `LOG_*`, `DEBUG*`, `PYTHON*`, `CI`..., see `IMPORT_TIME_PREFIXES`) differ. Any failure to attach is the
  same: a debug log line on stderr, then the ordinary start. `TRIO_ACP_WARM=0` skips it.
- The socket lives in a private directory (0700, checked to be ours; the socket 0600):
  `$TRIO_ACP_WARM_DIR`, else `$XDG_RUNTIME_DIR/trio-acp`, else `/tmp/trio-acp-<uid>`. Both
  ends check the peer's uid (SO_PEERCRED).
- The server exits after `$TRIO_ACP_WARM_IDLE` seconds (default 1800) without a launch and
  without a live child, when its package files change, and on `trio-acp warm stop` (children
  running then finish their sessions first). The launcher's death (even SIGKILL) ends its
  child (SIGTERM: the graceful stdin-EOF shutdown); the server's death ends its children too
  (PR_SET_PDEATHSIG).

Linux only (SCM_RIGHTS + SO_PEERCRED + pidfd): elsewhere every launch is an ordinary one.
This module imports neither trio nor the SDK at the top: the launcher path must start fast.
"""

from __future__ import annotations

import array
import hashlib
import json
import logging
import os
import signal
import socket
import struct
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

log = logging.getLogger("trio_acp.warm")

SOCKET_NAME = "warm.sock"
LOCK_NAME = "warm.lock"
LOG_NAME = "warm.log"
DEFAULT_IDLE = 1800.0
#: Variables the SDK, litellm or Python read at import time (module-level reads in the
#: installed openhands and litellm packages): a launch whose values differ from the
#: server's would not get what it asked for, so it starts cold. Variables read later (the
#: `LLM_*` settings, `OPENHANDS_PERSISTENCE_DIR`, `TRIO_ACP_*`) may differ freely.
IMPORT_TIME_PREFIXES = ("LITELLM_", "LOG_", "DEBUG", "PYTHON", "DEFAULT_", "ACP_")
IMPORT_TIME_NAMES = frozenset(
    {
        "CI",
        "GITHUB_ACTIONS",
        "OPENHANDS_SUPPRESS_BANNER",
        "ANTHROPIC_TOKEN_COUNTING_BETA_VERSION",
        "DYNAMIC_RATE_LIMIT_ERROR_THRESHOLD_PER_MINUTE",
        "EXTENSIONS_REF",
        "PROXY_BASE_URL",
        "REQUEST_TIMEOUT",
        "RUNWAYML_POLLING_TIMEOUT",
        "SPEND_LOG_CLEANUP_MAX_CONSECUTIVE_BATCH_FAILURES",
    }
)
#: The signals a launcher passes on to its child.
RELAYED_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
_MAX_MESSAGE = 16 << 20
_HEADER = struct.Struct("!I")


class WarmError(Exception):
    """The warm server cannot be used (the launcher starts the ordinary way)."""


def supported() -> bool:
    return (
        sys.platform.startswith("linux")
        and hasattr(socket, "SO_PEERCRED")
        and hasattr(os, "pidfd_open")
    )


def enabled(env: Mapping[str, str] | None = None) -> bool:
    env = os.environ if env is None else env
    return (
        env.get("TRIO_ACP_WARM", "1").strip().lower() not in {"0", "false", "no", "off"}
        and supported()
    )


def warm_dir(env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    if env.get("TRIO_ACP_WARM_DIR"):
        return Path(env["TRIO_ACP_WARM_DIR"])
    if env.get("XDG_RUNTIME_DIR"):
        return Path(env["XDG_RUNTIME_DIR"]) / "trio-acp"
    return Path(f"/tmp/trio-acp-{os.getuid()}")


def socket_path(env: Mapping[str, str] | None = None) -> Path:
    return warm_dir(env) / SOCKET_NAME


def private_dir(env: Mapping[str, str] | None = None, *, create: bool = False) -> Path:
    """The warm directory, checked: a real directory (no symlink), ours, mode 0700."""
    path = warm_dir(env)
    if create:
        try:
            path.mkdir(mode=0o700, parents=True)
        except FileExistsError:
            pass
    st = os.lstat(path)
    import stat as stat_module

    if not stat_module.S_ISDIR(st.st_mode):
        raise WarmError(f"{path} is not a directory")
    if st.st_uid != os.getuid():
        raise WarmError(f"{path} belongs to uid {st.st_uid}, not {os.getuid()}")
    if st.st_mode & 0o077:
        raise WarmError(f"{path} is open to others (mode {st.st_mode & 0o777:o}); it must be 0700")
    return path


def fingerprint() -> str:
    """What a server and a launcher must share: the interpreter, trio-acp's version and
    files, and the SDK's version. Cheap (stats only), so every launch can check it."""
    from . import __version__

    h = hashlib.sha256()
    h.update(f"{sys.executable}\0{sys.version}\0{__version__}\0".encode())
    package = Path(__file__).resolve().parent
    for path in sorted(package.rglob("*.py")):
        try:
            st = path.stat()
        except OSError:
            continue
        h.update(f"{path.relative_to(package)}\0{st.st_mtime_ns}\0{st.st_size}\0".encode())
    # The SDK's installed versions, by their dist-info names (importlib.metadata would cost
    # the launcher a quarter of a second).
    for entry in sys.path:
        try:
            names = os.listdir(entry or ".")
        except OSError:
            continue
        for name in sorted(names):
            if name.startswith(("openhands_sdk-", "openhands_tools-")) and name.endswith(
                ".dist-info"
            ):
                h.update(f"{entry}\0{name}\0".encode())
    return h.hexdigest()[:32]


def import_time_env(env: Mapping[str, str]) -> dict[str, str]:
    return {
        name: value
        for name, value in env.items()
        if name in IMPORT_TIME_NAMES or name.startswith(IMPORT_TIME_PREFIXES)
    }


def _peer_uid(sock: socket.socket) -> int:
    creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    _pid, uid, _gid = struct.unpack("3i", creds)
    return uid


# --- framing: a 4-byte length, then JSON --------------------------------------------------


def _send(sock: socket.socket, message: Mapping[str, Any], fds: list[int] | None = None) -> None:
    data = json.dumps(message).encode()
    payload = _HEADER.pack(len(data)) + data
    if fds:
        ancillary = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))]
        sent = sock.sendmsg([payload], ancillary)
        payload = payload[sent:]
    if payload:
        sock.sendall(payload)


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    chunks = []
    while n:
        chunk = sock.recv(n)
        if not chunk:
            raise EOFError("connection closed")
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def _recv(sock: socket.socket, *, max_fds: int = 0) -> tuple[dict[str, Any], list[int]]:
    fds: list[int] = []
    if max_fds:
        fd_size = array.array("i").itemsize
        head, ancdata, flags, _ = sock.recvmsg(_HEADER.size, socket.CMSG_SPACE(max_fds * fd_size))
        for level, kind, data in ancdata:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                got = array.array("i")
                got.frombytes(data[: len(data) - len(data) % fd_size])
                fds.extend(got)
        if not head:
            raise EOFError("connection closed")
        if flags & socket.MSG_CTRUNC:
            for fd in fds:
                os.close(fd)
            raise WarmError("too many file descriptors")
        if len(head) < _HEADER.size:
            head += _recv_exact(sock, _HEADER.size - len(head))
    else:
        head = _recv_exact(sock, _HEADER.size)
    (length,) = _HEADER.unpack(head)
    if length > _MAX_MESSAGE:
        raise WarmError("message too long")
    return json.loads(_recv_exact(sock, length)), fds


def _connect(path: Path, timeout: float) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(timeout)
        sock.connect(str(path))
        if _peer_uid(sock) != os.getuid():
            raise WarmError("the warm server runs as another user")
        return sock
    except BaseException:
        sock.close()
        raise


def request(
    op: str, *, env: Mapping[str, str] | None = None, timeout: float = 5.0
) -> dict[str, Any]:
    """A control request (`status`, `stop`) to the running server."""
    path = private_dir(env) / SOCKET_NAME
    with _connect(path, timeout) as sock:
        _send(sock, {"op": op})
        reply, _ = _recv(sock)
        return reply


# --- the launcher ---------------------------------------------------------------------------


def launch(argv: list[str]) -> int | None:
    """Serve this launch from the warm server: the child's exit status, or None when the
    server cannot take it (the caller then starts the ordinary way)."""
    if not enabled():
        return None
    try:
        sock = _connect(private_dir() / SOCKET_NAME, timeout=5.0)
    except (OSError, WarmError) as exc:
        log.debug("warm start: no server (%s); starting cold", exc)
        return None
    # From the hand-over on, the child serves the client: a signal to this process is for
    # it. One arriving before the server's answer is held, then relayed (or, if the launch
    # is refused, delivered here as if nothing had been tried).
    pending: list[int] = []
    previous = {
        signum: signal.signal(signum, lambda signum, _frame: pending.append(signum))
        for signum in RELAYED_SIGNALS
    }

    def refused(reason: object) -> None:
        log.debug("warm start: launch refused (%s); starting cold", reason)
        sock.close()
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        for held in pending:
            os.kill(os.getpid(), held)

    try:
        env = dict(os.environ)
        umask = os.umask(0o022)
        os.umask(umask)
        message = {
            "op": "launch",
            "fingerprint": fingerprint(),
            "import_env": import_time_env(env),
            "argv": argv,
            "cwd": os.getcwd(),
            "umask": umask,
            "env": env,
            "pid": os.getpid(),
        }
        _send(sock, message, fds=[0, 1, 2])
        del message, env
        # The server answers right after its fork. Giving up later than that would leave
        # a child and this process both on the client's stdio, so the wait is generous
        # (if it does expire, the server sees this connection close and ends the child).
        sock.settimeout(float(os.environ.get("TRIO_ACP_WARM_REPLY_TIMEOUT", "60")))
        reply, _ = _recv(sock)
    except (OSError, EOFError, ValueError, WarmError) as exc:
        refused(exc)
        return None
    if not reply.get("ok"):
        refused(reply.get("reason"))
        return None
    log.debug(
        "warm start: served by child %s of warm server %s", reply.get("pid"), reply.get("server")
    )
    return _supervise(sock, pending)


def _protect_credentials() -> None:
    """Like the ordinary start (credentials.withhold_agent_variables): no process of ours
    keeps the agent's credentials readable by the tools, which run as the same user. The
    launcher starts no process, so its environment stays; its /proc environ block is wiped
    and it is made non-dumpable. (After the hand-over, not before: it costs the launcher
    ~0.1-0.4 s of imports, and no tool can run before a session is set up.)"""
    from .credentials import (
        _make_non_dumpable,
        _wipe_initial_environment,
        is_agent_variable,
        model_key_variables,
    )

    env = dict(os.environ)
    _wipe_initial_environment({n for n in env if is_agent_variable(n)} | model_key_variables(env))
    _make_non_dumpable()


def _supervise(sock: socket.socket, pending: list[int]) -> int:
    """Relay signals to the child until the server reports its exit; return its status."""
    # The child holds the protocol's stdin/stdout now: drop ours, so that the client sees
    # EOF as soon as the child closes them.
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)
    os.close(devnull)
    sock.settimeout(None)

    def relay(signum: int, _frame: Any) -> None:
        try:
            _send(sock, {"op": "signal", "signum": signum})
        except OSError:
            pass

    for signum in RELAYED_SIGNALS:
        signal.signal(signum, relay)
    for held in pending:
        relay(held, None)
    if sys.platform.startswith("linux"):
        _protect_credentials()
    try:
        while True:
            try:
                message, _ = _recv(sock)
            except InterruptedError:
                continue
            if "exit" in message:
                return int(message["exit"])
            if "signal" in message:
                # The child died of a signal: so does this process, for the client to see.
                died_of = int(message["signal"])
                try:
                    signal.signal(died_of, signal.SIG_DFL)
                except (OSError, ValueError):  # SIGKILL, SIGSTOP: always the default
                    pass
                os.kill(os.getpid(), died_of)
                return 128 + died_of
    except (OSError, EOFError, ValueError) as exc:
        print(f"trio-acp: lost the warm server ({exc})", file=sys.stderr)
        return 1
    finally:
        sock.close()


def start(idle: float | None = None, wait: float = 300.0) -> int:
    """`trio-acp warm start`: start a server in the background unless one runs."""
    if not supported():
        print("warm start needs Linux", file=sys.stderr)
        return 2
    try:
        status = request("status")
        print(f"warm server already running (pid {status['pid']})")
        return 0
    except (OSError, EOFError, ValueError, WarmError):
        pass
    import subprocess

    directory = private_dir(create=True)
    command = [sys.executable, "-m", "trio_acp", "warm", "serve"]
    if idle is not None:
        command += ["--idle", str(idle)]
    with open(directory / LOG_NAME, "ab") as log_file:
        os.chmod(directory / LOG_NAME, 0o600)
        proc = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=log_file,
            stderr=log_file,
            start_new_session=True,
            cwd="/",
        )
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            print(
                f"warm server exited with status {proc.returncode}; see {directory / LOG_NAME}",
                file=sys.stderr,
            )
            return 1
        try:
            status = request("status")
            print(f"warm server running (pid {status['pid']}, socket {directory / SOCKET_NAME})")
            return 0
        except (OSError, EOFError, ValueError, WarmError):
            time.sleep(0.2)
    print("warm server did not become ready in time", file=sys.stderr)
    return 1


def stop() -> int:
    try:
        reply = request("stop")
    except (OSError, EOFError, ValueError, WarmError) as exc:
        print(f"no warm server running ({exc})")
        return 0
    running = reply.get("children", 0)
    note = f"; {running} running session(s) finish first" if running else ""
    print(f"warm server {reply['pid']} stopping{note}")
    return 0


def status() -> int:
    try:
        reply = request("status")
    except (OSError, EOFError, ValueError, WarmError) as exc:
        print(f"no warm server running ({exc})")
        return 3
    print(json.dumps(reply, indent=2))
    return 0
