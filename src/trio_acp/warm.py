"""Warm start: a fork server that has imported the SDK, and the launcher that attaches to it.

Importing the OpenHands SDK costs seconds (litellm alone most of them), and every process an
editor launches pays it before its first `session/new`. A *warm server* imports it once and
waits on a Unix socket. A new `trio-acp` process (the *launcher*) connects, and the server
forks a *child*, already past the import, that serves ACP on the launcher's own stdin and
stdout. The launcher stays as the client's process: it relays SIGTERM/SIGINT/SIGHUP to the
child and exits with the child's status. On by default (`TRIO_ACP_WARM=0` turns it off): a
launch that finds no server starts one in the background and goes on cold.

The hand-over (README "Warm start"; tests/e2e/test_warm_handover.py):

1. The launcher makes a socket pair, connects to the server and sends its launch (argv,
   cwd, umask, environment and its raw block, resource limits) with one end of the pair:
   never its stdio.
2. The server checks it and forks a child, which takes the launcher's state
   (warm_child.py) and *claims* the launch over the pair.
3. The launcher, if it still waits, answers the claim with its stdin, stdout and stderr
   (SCM_RIGHTS): that send is the one step that decides who serves. A launcher whose wait
   (`$TRIO_ACP_WARM_WAIT`, 0.5 s) ran out first closes its end instead and starts cold; a
   child that claims later reads end-of-file and exits, never having held the client's pipes.
   So no sequence of stalls, signals and timeouts leaves two agents on one pipe.

Lifecycle and safety:

- One server per installation and import-time environment: its socket is
  `warm-<key>.sock`, the key a hash of `fingerprint()` and the variables the import reads
  (warm_env.py). A launch that finds none starts one and says so, once, on stderr.
- The server forks only while it is single-threaded, never runs Trio itself, and serves
  every connection at once (a silent one delays no other). A child is on its own from the
  hand-over: it reports its exit status to its launcher itself, and it ends (SIGTERM, the
  graceful shutdown) when its launcher dies, even by SIGKILL.
- The socket lives in a private directory (0700, checked to be ours; the socket 0600):
  `$TRIO_ACP_WARM_DIR`, else `$XDG_RUNTIME_DIR/trio-acp`, else `/tmp/trio-acp-<uid>`. Both
  ends check the peer's uid (SO_PEERCRED).
- The server exits after `$TRIO_ACP_WARM_IDLE` seconds (default 1800) without a launch and
  without a live child, when its package files change, and on `trio-acp warm stop`, which
  escalates to SIGKILL if it must (running sessions go on: they are their launchers').

Linux only (SCM_RIGHTS + SO_PEERCRED + pidfd): elsewhere every launch is an ordinary one.
This module imports neither trio nor the SDK: the launcher path must start fast.
"""

from __future__ import annotations

import array
import base64
import errno
import fcntl
import hashlib
import json
import os
import selectors
import signal
import socket
import struct
import sys
import time
from pathlib import Path

from .warm_env import import_hashes, import_time_env, server_key

# `typing` (and `re` under it) would cost every launch ~10 ms: annotations only.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping
    from typing import Any

LOG_NAME = "warm.log"
DEFAULT_IDLE = 1800.0
#: How long a launch waits for the server (connect → the child's claim) before it goes cold.
DEFAULT_WAIT = 0.5
#: The signals a launcher passes on to its child.
RELAYED_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
#: What a launcher passes to the server's children besides what they need to serve: where the
#: server is, and the settings of the server itself (warm.py `server_environment`).
_SERVER_VARIABLES = (
    "HOME",
    "PATH",
    "USER",
    "LOGNAME",
    "LANG",
    "XDG_RUNTIME_DIR",
    "TMPDIR",
    "TRIO_ACP_WARM_DIR",
    "TRIO_ACP_WARM_IDLE",
)
_MAX_MESSAGE = 16 << 20
_HEADER = struct.Struct("!I")
# A bound path of a Unix socket is at most 107 bytes; a longer one is reached through the
# directory's file descriptor (/proc/self/fd/N/NAME).
_SUN_PATH_MAX = 100


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


def socket_name(key: str) -> str:
    return f"warm-{key}.sock"


def lock_name(key: str) -> str:
    return f"warm-{key}.lock"


_fingerprint: str | None = None
_INSTALLED_MARKERS = (
    "openhands/sdk/__init__.py",
    "openhands/tools/__init__.py",
    "litellm/__init__.py",
)


def fingerprint(*, cached: bool = True) -> str:
    """What a server and a launcher must share: the interpreter, trio-acp's version and
    files, and the installed packages. Cheap (stats only: no listing of site-packages, no
    importlib.metadata), as every launch computes it once; the server computes it afresh
    (`cached=False`) to notice an upgrade."""
    global _fingerprint
    if cached and _fingerprint is not None:
        return _fingerprint
    from . import __version__

    h = hashlib.sha256()
    h.update(f"{sys.executable}\0{sys.version}\0{__version__}\0".encode())
    package = os.path.dirname(os.path.abspath(__file__))
    pending = [package]
    while pending:
        directory = pending.pop()
        try:
            entries = sorted(os.scandir(directory), key=lambda entry: entry.name)
        except OSError:
            continue
        for entry in entries:
            if entry.is_dir(follow_symlinks=False) and entry.name != "__pycache__":
                pending.append(entry.path)
            elif entry.name.endswith(".py"):
                try:
                    st = entry.stat()
                except OSError:
                    continue
                h.update(f"{entry.path}\0{st.st_mtime_ns}\0{st.st_size}\0".encode())
    # The SDK and litellm as installed: an upgrade rewrites their package files (a few
    # stats, where listing site-packages or importlib.metadata would cost a launch tens of
    # milliseconds).
    for site in sys.path:
        if not site or not os.path.isabs(site):
            continue  # the launcher's cwd (`python -m`): the installation is elsewhere
        for marker in _INSTALLED_MARKERS:
            try:
                st = os.stat(os.path.join(site, marker))
            except OSError:
                continue
            h.update(f"{site}\0{marker}\0{st.st_mtime_ns}\0{st.st_size}\0".encode())
    _fingerprint = h.hexdigest()[:32]
    return _fingerprint


def current_key(env: Mapping[str, str] | None = None) -> str:
    return server_key(fingerprint(), os.environ if env is None else env)


def _peer_uid(sock: socket.socket) -> int:
    creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    _pid, uid, _gid = struct.unpack("3i", creds)
    return uid


def address(directory: Path, name: str, dir_fd: int | None = None) -> str:
    """The path to bind or connect to: `directory/name`, or through `dir_fd` when too long."""
    path = str(directory / name)
    if len(path.encode()) <= _SUN_PATH_MAX or dir_fd is None:
        return path
    return f"/proc/self/fd/{dir_fd}/{name}"


# --- framing: a 4-byte length, then JSON --------------------------------------------------


def encode(message: Mapping[str, Any]) -> bytes:
    data = json.dumps(message).encode("utf-8", "surrogateescape")
    return _HEADER.pack(len(data)) + data


def _send(sock: socket.socket, message: Mapping[str, Any], fds: list[int] | None = None) -> None:
    payload = encode(message)
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


def fds_of(ancdata: list[tuple[int, int, bytes]]) -> list[int]:
    fd_size = array.array("i").itemsize
    fds: list[int] = []
    for level, kind, data in ancdata:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            got = array.array("i")
            got.frombytes(data[: len(data) - len(data) % fd_size])
            fds.extend(got)
    return fds


def _recv(sock: socket.socket, *, max_fds: int = 0) -> tuple[dict[str, Any], list[int]]:
    fds: list[int] = []
    if max_fds:
        fd_size = array.array("i").itemsize
        head, ancdata, flags, _ = sock.recvmsg(_HEADER.size, socket.CMSG_SPACE(max_fds * fd_size))
        fds = fds_of(ancdata)
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
    return json.loads(_recv_exact(sock, length).decode("utf-8", "surrogateescape")), fds


def decode(data: bytes) -> tuple[dict[str, Any] | None, bytes]:
    """One whole message from the front of `data`, and the rest; None if not all there."""
    if len(data) < _HEADER.size:
        return None, data
    (length,) = _HEADER.unpack_from(data)
    if length > _MAX_MESSAGE:
        raise WarmError("message too long")
    end = _HEADER.size + length
    if len(data) < end:
        return None, data
    return json.loads(data[_HEADER.size : end].decode("utf-8", "surrogateescape")), data[end:]


def _connect(path: str, timeout: float) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(timeout)
        sock.connect(path)
        if _peer_uid(sock) != os.getuid():
            raise WarmError("the warm server runs as another user")
        return sock
    except BaseException:
        sock.close()
        raise


def _server_address(directory: Path, key: str) -> tuple[str, int | None]:
    fd = None
    if len(str(directory / socket_name(key)).encode()) > _SUN_PATH_MAX:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    return address(directory, socket_name(key), fd), fd


def request(
    op: str,
    *,
    env: Mapping[str, str] | None = None,
    key: str | None = None,
    timeout: float = 5.0,
) -> dict[str, Any]:
    """A control request (`status`, `stop`) to the server of `key` (default: this
    environment's)."""
    directory = private_dir(env)
    key = current_key(env) if key is None else key
    path, fd = _server_address(directory, key)
    try:
        with _connect(path, timeout) as sock:
            _send(sock, {"op": op})
            reply, _ = _recv(sock)
            return reply
    finally:
        if fd is not None:
            os.close(fd)


# --- the launcher ---------------------------------------------------------------------------


def _cold(reason: str) -> None:
    """Say once, on stderr, why this launch starts the ordinary way (never on stdout)."""
    print(
        f"trio-acp: warm start: {reason}; this launch starts cold (the SDK import takes "
        "seconds). TRIO_ACP_WARM=0 turns warm start off (README, Warm start).",
        file=sys.stderr,
        flush=True,
    )


def _wait_budget() -> float:
    try:
        return max(0.0, float(os.environ.get("TRIO_ACP_WARM_WAIT", DEFAULT_WAIT)))
    except ValueError:
        return DEFAULT_WAIT


def rlimits() -> dict[str, list[int]]:
    """This process's resource limits (every RLIMIT_*), for its child to take
    (warm_child.apply_rlimits)."""
    import resource

    limits = {}
    for name in dir(resource):
        if name.startswith("RLIMIT_"):
            try:
                limits[name] = list(resource.getrlimit(getattr(resource, name)))
            except (OSError, ValueError):
                pass
    return limits


def _raw_block(name: str) -> bytes:
    try:
        with open(f"/proc/self/{name}", "rb") as f:
            return f.read()
    except OSError:
        return b""


def launch(argv: list[str]) -> int | None:
    """Serve this launch from the warm server: the child's exit status, or None when the
    server cannot take it (the caller then starts the ordinary way, and this has said why
    on stderr)."""
    if not enabled():
        return None
    deadline = time.monotonic() + _wait_budget()
    try:
        directory = private_dir(create=True)
    except (OSError, WarmError) as exc:
        _cold(f"cannot use the warm directory ({exc})")
        return None
    key = current_key()
    path, dir_fd = _server_address(directory, key)
    try:
        try:
            sock = _connect(path, timeout=max(0.001, deadline - time.monotonic()))
        except (FileNotFoundError, ConnectionRefusedError):
            try:
                pid = spawn_server(directory, key)
                started = f"started one (pid {pid})" if pid else "one is starting"
            except OSError as exc:  # no fork (limits, memory): this launch is all there is
                started = f"could not start one ({exc})"
            _cold(
                "no warm server for this installation and environment yet; "
                + started
                + _other_servers_note(directory, key)
            )
            return None
        except (OSError, WarmError) as exc:
            _cold(f"could not reach the warm server ({exc})")
            return None
    finally:
        if dir_fd is not None:
            os.close(dir_fd)
    return _hand_over(sock, argv, deadline)


def _other_servers_note(directory: Path, key: str) -> str:
    """Why there is no server for this launch when there are others: which import-time
    variables differ from theirs (names only)."""
    notes = []
    try:
        others = list(running_servers(directory))
    except OSError:
        return ""
    for other in others:
        if other.key == key or other.import_hashes is None:
            continue
        mine = import_hashes(os.environ)
        names = sorted(
            n
            for n in mine.keys() | other.import_hashes.keys()
            if mine.get(n) != other.import_hashes.get(n)
        )
        if names:
            shown = ", ".join(names[:5]) + (", ..." if len(names) > 5 else "")
            notes.append(f"server {other.pid} was started with other values of {shown}")
        else:
            notes.append(f"server {other.pid} runs another installation or version")
    return f" ({'; '.join(notes)})" if notes else ""


def _hand_over(sock: socket.socket, argv: list[str], deadline: float) -> int | None:
    # From the hand-over on, the child serves the client: a signal to this process is for
    # it. One arriving before that is held, then relayed (or, if this launch goes cold,
    # delivered here as if nothing had been tried).
    pending: list[int] = []
    previous = {
        signum: signal.signal(signum, lambda signum, _frame: pending.append(signum))
        for signum in RELAYED_SIGNALS
    }
    own, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)

    def cold(reason: str) -> None:
        # Closing `own` is what makes a late child's claim read end-of-file.
        own.close()
        sock.close()
        _cold(reason)
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        for held in pending:
            os.kill(os.getpid(), held)

    try:
        umask = os.umask(0o022)
        os.umask(umask)
        message = {
            "op": "launch",
            "fingerprint": fingerprint(),
            "import_env": import_time_env(os.environ),
            "argv": argv,
            "cwd": os.getcwd(),
            "umask": umask,
            "env": dict(os.environ),
            "environ_block": base64.b64encode(_raw_block("environ")).decode(),
            "cmdline": base64.b64encode(_raw_block("cmdline")).decode(),
            "rlimits": rlimits(),
            "pid": os.getpid(),
        }
        sock.settimeout(max(0.001, deadline - time.monotonic()))
        _send(sock, message, fds=[theirs.fileno()])
        del message
    except (OSError, ValueError, WarmError) as exc:
        theirs.close()
        cold(f"could not send the launch to the warm server ({exc})")
        return None
    theirs.close()
    with selectors.DefaultSelector() as selector:
        selector.register(sock, selectors.EVENT_READ, "server")
        selector.register(own, selectors.EVENT_READ, "child")
        while True:
            remaining = deadline - time.monotonic()
            ready = selector.select(remaining) if remaining > 0 else []
            if not ready:
                cold(
                    f"the warm server did not hand over within {_wait_budget():g} s "
                    "(busy or stopped)"
                )
                return None
            for selected, _ in ready:
                if selected.data == "server":
                    try:
                        sock.settimeout(max(0.001, deadline - time.monotonic()))
                        reply, _ = _recv(sock)
                    except (OSError, EOFError, ValueError, WarmError) as exc:
                        cold(f"the warm server closed the launch ({exc})")
                        return None
                    if not reply.get("ok"):
                        cold(f"the warm server refused the launch ({reply.get('reason')})")
                        return None
                    selector.unregister(sock)  # its next message is the child's exit
                    continue
                try:
                    own.settimeout(max(0.001, deadline - time.monotonic()))
                    claim, _ = _recv(own)
                except (OSError, EOFError, ValueError, WarmError) as exc:
                    cold(f"the warm server's child ended before it served ({exc})")
                    return None
                if "claim" not in claim:
                    why = claim.get("refuse", "it did not claim it")
                    cold(f"the warm server's child refused the launch ({why})")
                    return None
                # The one step that decides: from here the child serves, and nothing here
                # may start the ordinary way. Sent whole or not at all (an empty pair).
                try:
                    own.settimeout(None)
                    _send(own, {"go": True}, fds=[0, 1, 2])
                except OSError as exc:
                    cold(f"the warm server's child ended before it served ({exc})")
                    return None
                return _supervise(own, sock, pending)


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


def _supervise(child: socket.socket, server: socket.socket, pending: list[int]) -> int:
    """Relay signals to the child until it reports its exit; return its status."""
    # The child holds the protocol's stdin/stdout now: drop ours, so that the client sees
    # EOF as soon as the child closes them.
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)
    os.close(devnull)

    def relay(signum: int, _frame: Any) -> None:
        try:
            _send(child, {"signal": signum})
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
                message, _ = _recv(child)
            except InterruptedError:
                continue
            except (OSError, EOFError, ValueError):
                break
            if "exit" in message:
                return int(message["exit"])
    finally:
        child.close()
    # The child died without a word (a signal): its parent, the server, knows how.
    try:
        server.settimeout(2.0)
        while True:
            message, _ = _recv(server)
            if "exit" in message:
                return int(message["exit"])
            if "signal" in message:
                died_of = int(message["signal"])
                try:
                    signal.signal(died_of, signal.SIG_DFL)
                except (OSError, ValueError):  # SIGKILL, SIGSTOP: always the default
                    pass
                os.kill(os.getpid(), died_of)
                return 128 + died_of
    except (OSError, EOFError, ValueError, WarmError):
        print("trio-acp: the warm child ended without an exit status", file=sys.stderr)
        return 1
    finally:
        server.close()


# --- starting a server --------------------------------------------------------------------


def server_environment(env: Mapping[str, str]) -> dict[str, str]:
    """The environment a server starts with: what its import reads, where it lives, and
    nothing else (no credential: the children take their launchers' own)."""
    kept = import_time_env(env)
    for name in _SERVER_VARIABLES:
        if name in env:
            kept[name] = env[name]
    kept.setdefault("OPENHANDS_SUPPRESS_BANNER", "1")
    return kept


def spawn_server(directory: Path, key: str, idle: float | None = None) -> int | None:
    """Start a server for `key` in the background (a new session, its output to warm.log),
    unless one holds its lock; its pid, or None. Never waits for it."""
    if lock_holder(directory / lock_name(key)) is not None:
        return None
    command = [sys.executable, "-m", "trio_acp", "warm", "serve"]
    if idle is not None:
        command += ["--idle", str(idle)]
    env = server_environment(os.environ)
    log_path = directory / LOG_NAME
    read_pid, write_pid = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the forked process
        try:
            os.close(read_pid)
            os.setsid()
            grandchild = os.fork()
            if grandchild:
                os.write(write_pid, str(grandchild).encode())
                os._exit(0)
            log_fd = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            null = os.open(os.devnull, os.O_RDONLY)
            os.dup2(null, 0)
            os.dup2(log_fd, 1)
            os.dup2(log_fd, 2)
            os.closerange(3, 1 << 16)
            os.chdir("/")
            os.execve(sys.executable, command, env)
        finally:
            os._exit(127)
    os.close(write_pid)
    try:
        os.waitpid(pid, 0)
        with os.fdopen(read_pid, "rb") as f:
            data = f.read()
    except OSError:
        return None
    return int(data) if data else None


# --- finding, stopping, showing servers ------------------------------------------------------


class Running:
    """A server that holds its lock: its pid (from the lock file) and what it wrote there."""

    def __init__(self, directory: Path, key: str, pid: int | None, info: dict[str, Any]):
        self.directory, self.key, self.pid, self.info = directory, key, pid, info
        hashes = info.get("import_hashes")
        self.import_hashes: dict[str, str] | None = hashes if isinstance(hashes, dict) else None


def lock_holder(path: Path) -> int | None:
    """The pid of the server holding `path` (0 if it holds it but has not written it yet),
    or None if nobody holds it."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                return None
            data = os.pread(fd, 1 << 16, 0)
            try:
                return int(json.loads(data).get("pid", 0))
            except (ValueError, AttributeError):
                return 0
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


def _lock_info(path: Path) -> dict[str, Any]:
    try:
        info = json.loads(path.read_bytes())
        return info if isinstance(info, dict) else {}
    except (OSError, ValueError):
        return {}


def running_servers(directory: Path) -> Iterator[Running]:
    for path in sorted(directory.glob("warm-*.lock")):
        pid = lock_holder(path)
        if pid is not None:
            key = path.name[len("warm-") : -len(".lock")]
            yield Running(directory, key, pid or None, _lock_info(path))


def _is_our_server(pid: int) -> bool:
    try:
        st = os.stat(f"/proc/{pid}")
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmdline = f.read().split(b"\0")
    except OSError:
        return False
    return st.st_uid == os.getuid() and b"warm" in cmdline and b"serve" in cmdline


def _wait_released(path: Path, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while lock_holder(path) is not None:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def stop_server(server: Running, *, grace: float = 3.0) -> str:
    """Stop one server whatever state it is in: asked over its socket, then SIGTERM (and
    SIGCONT, for a stopped one), then SIGKILL. Running sessions are their launchers' and go
    on. How it ended, in words."""
    lock = server.directory / lock_name(server.key)
    try:
        request(
            "stop", env={"TRIO_ACP_WARM_DIR": str(server.directory)}, key=server.key, timeout=0.5
        )
        if _wait_released(lock, grace):
            return "stopped"
    except (OSError, EOFError, ValueError, WarmError):
        pass
    pid = server.pid
    if not pid or not _is_our_server(pid):
        # It held its lock when it was listed: gone now means it stopped (asked over its
        # socket, it may leave before its answer is read).
        return "stopped" if _wait_released(lock, grace) else "holds its lock but is not ours"
    for signum, how in ((signal.SIGTERM, "stopped (SIGTERM)"), (signal.SIGKILL, "killed")):
        try:
            os.kill(pid, signum)
            if signum == signal.SIGTERM:
                os.kill(pid, signal.SIGCONT)
        except ProcessLookupError:
            return "stopped"
        if _wait_released(lock, grace):
            return how
    return "did not stop"


def _clean_stale(directory: Path) -> None:
    """Sockets and locks no live server holds (a killed server's) are removed."""
    for path in directory.glob("warm-*.lock"):
        if lock_holder(path) is None:
            key = path.name[len("warm-") : -len(".lock")]
            for stale in (directory / socket_name(key), path):
                try:
                    stale.unlink()
                except OSError:
                    pass


def stop_all_under(directory: Path) -> list[str]:
    """Stop every server in `directory` and the directories under it (a test session's
    own, tests/conftest.py); what happened to each, in words."""
    done = []
    for parent in sorted({lock.parent for lock in directory.rglob("warm-*.lock")}):
        for server in running_servers(parent):
            done.append(f"{server.pid}: {stop_server(server, grace=2.0)}")
    return done


def start(idle: float | None = None, wait: float = 300.0) -> int:
    """`trio-acp warm start`: start this environment's server in the background unless one
    runs, and wait until it answers. Agrees with `warm status`: a server that holds its lock
    is running, answering or not; one whose socket is there but does not answer is said to
    be stalled (and `warm stop` ends it), one without a socket yet is still importing."""
    if not supported():
        print("warm start needs Linux", file=sys.stderr)
        return 2
    try:
        directory = private_dir(create=True)
    except (OSError, WarmError) as exc:
        print(f"cannot use the warm directory: {exc}", file=sys.stderr)
        return 1
    key = current_key()
    pid = lock_holder(directory / lock_name(key))
    if pid is None:
        pid = spawn_server(directory, key, idle)
    deadline = time.monotonic() + wait
    while True:
        try:
            status = request("status", key=key, timeout=2.0)
            print(
                f"warm server running (pid {status['pid']}, socket {directory / socket_name(key)})"
            )
            return 0
        except (OSError, EOFError, ValueError, WarmError) as exc:
            holder = lock_holder(directory / lock_name(key))
            if holder is None and (pid is None or not _alive(pid)):
                print(f"warm server exited; see {directory / LOG_NAME}", file=sys.stderr)
                return 1
            if isinstance(exc, TimeoutError) or time.monotonic() > deadline:
                print(
                    f"warm server (pid {holder or pid}) holds its lock but does not answer; "
                    "`trio-acp warm stop` ends it",
                    file=sys.stderr,
                )
                return 1
            time.sleep(0.2)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def stop() -> int:
    """`trio-acp warm stop`: stop every server of this user's warm directory."""
    try:
        directory = private_dir()
    except (OSError, WarmError) as exc:
        print(f"no warm server running ({exc})")
        return 0
    servers = list(running_servers(directory))
    if not servers:
        print("no warm server running")
    code = 0
    for server in servers:
        how = stop_server(server)
        print(f"warm server {server.pid or '?'} ({server.key}): {how}")
        if how in ("did not stop", "holds its lock but is not ours"):
            code = 1
    _clean_stale(directory)
    return code


def status() -> int:
    """`trio-acp warm status`: every server of this user's warm directory, as JSON; exit
    status 3 when none runs. A server that holds its lock but does not answer is listed
    (`"answering": false`): `warm start` sees it too, and `warm stop` ends it."""
    try:
        directory = private_dir()
    except (OSError, WarmError) as exc:
        print(f"no warm server running ({exc})")
        return 3
    key = current_key()
    shown = []
    for server in running_servers(directory):
        try:
            reply = request(
                "status", env={"TRIO_ACP_WARM_DIR": str(directory)}, key=server.key, timeout=0.5
            )
            reply["answering"] = True
        except (OSError, EOFError, ValueError, WarmError):
            reply = {"pid": server.pid, "answering": False}
        reply["key"] = server.key
        reply["this_environment"] = server.key == key
        shown.append(reply)
    if not shown:
        print("no warm server running")
        return 3
    # This environment's server at the top level (the usual case: the only one), and all.
    mine = next((reply for reply in shown if reply["this_environment"]), {})
    print(json.dumps({**mine, "servers": shown}, indent=2))
    return 0
