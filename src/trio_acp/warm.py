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
import fcntl
import hashlib
import json
import logging
import os
import selectors
import signal
import socket
import struct
import sys
import threading
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


# --- the server -----------------------------------------------------------------------------


def _load() -> None:
    """Import everything a child uses, in this (main) thread."""
    from .openhands import sdk

    sdk.import_sdk()
    import trio  # noqa: F401

    from . import cli, server  # noqa: F401

    # What a process's first model call imports lazily (the session warm-up does it again
    # in each child, then at no cost): the OpenAI client's resources, litellm's pydantic
    # types. Best effort: the session's own warm-up covers whatever this misses.
    try:
        import importlib

        for name in sdk.FIRST_CALL_IMPORTS:
            try:
                importlib.import_module(name)
            except ImportError:
                pass
        sdk._complete_models(importlib.import_module("litellm.types.utils"))
    except Exception:
        log.debug("warm server: could not warm the model call path", exc_info=True)


class _Server:
    def __init__(
        self, listener: socket.socket, idle: float, import_env: dict[str, str], fingerprint: str
    ) -> None:
        self.listener = listener
        self.idle = idle
        self.import_env = import_env
        self.fingerprint = fingerprint  # of the files as they were before the import
        self.started = time.time()
        self.last_activity = time.monotonic()
        self.accepting = True
        self.selector = selectors.DefaultSelector()
        self.children: dict[int, tuple[socket.socket, int]] = {}  # pid → (launcher, pidfd)
        self.launches = 0

    def run(self) -> None:
        self.selector.register(self.listener, selectors.EVENT_READ, ("accept", None))
        next_check = time.monotonic() + 10
        while self.accepting or self.children:
            timeout = 1.0 if not self.children else 10.0
            for key, _ in self.selector.select(timeout):
                kind, data = key.data
                try:
                    if kind == "accept":
                        self._accept()
                    elif kind == "launcher":
                        self._from_launcher(data)
                    elif kind == "child":
                        self._reap(data)
                except Exception:
                    log.exception("warm server: %s failed", kind)
            now = time.monotonic()
            if self.accepting and not self.children and now - self.last_activity > self.idle:
                log.info("warm server: idle for %.0f s, exiting", self.idle)
                self.stop_accepting()
            if self.accepting and now >= next_check:
                next_check = now + 10
                if fingerprint() != self.fingerprint:
                    log.info("warm server: trio-acp or the SDK changed, exiting")
                    self.stop_accepting()

    def stop_accepting(self) -> None:
        if not self.accepting:
            return
        self.accepting = False
        self.selector.unregister(self.listener)
        self.listener.close()
        try:
            os.unlink(self.path)
        except OSError:
            pass

    path: str = ""
    lock: Any = None

    def _accept(self) -> None:
        conn, _ = self.listener.accept()
        self.last_activity = time.monotonic()
        conn.settimeout(10)
        try:
            if _peer_uid(conn) != os.getuid():
                raise WarmError("peer is another user")
            message, fds = _recv(conn, max_fds=3)
        except Exception as exc:
            log.warning("warm server: rejected a connection: %s", exc)
            conn.close()
            return
        try:
            op = message.get("op")
            if op == "status":
                _send(conn, self.status())
            elif op == "stop":
                _send(conn, {"ok": True, "pid": os.getpid(), "children": len(self.children)})
                self.stop_accepting()
            elif op == "launch":
                if self._launch(conn, message, fds):
                    return  # conn is now the child's channel (the fds are the child's now)
            else:
                _send(conn, {"ok": False, "reason": f"unknown op {op!r}"})
        except Exception as exc:
            log.warning("warm server: %s request failed: %s", message.get("op"), exc)
        finally:
            for fd in fds:
                os.close(fd)
        conn.close()

    def status(self) -> dict[str, Any]:
        from . import __version__

        return {
            "ok": True,
            "pid": os.getpid(),
            "version": __version__,
            "fingerprint": self.fingerprint,
            "current": fingerprint() == self.fingerprint,
            "children": len(self.children),
            "launches": self.launches,
            "uptime": round(time.time() - self.started, 1),
            "idle_timeout": self.idle,
            "threads": threading.active_count(),
        }

    def _refuse(self, conn: socket.socket, reason: str) -> bool:
        log.info("warm server: refused a launch: %s", reason)
        _send(conn, {"ok": False, "reason": reason})
        return False

    def _launch(self, conn: socket.socket, message: dict[str, Any], fds: list[int]) -> bool:
        if len(fds) != 3:
            return self._refuse(conn, "expected 3 file descriptors")
        if message.get("fingerprint") != self.fingerprint:
            # A launcher from another version or install: it starts cold; a server left
            # behind by an upgrade goes away.
            if fingerprint() != self.fingerprint:
                self.stop_accepting()
            return self._refuse(conn, "stale server (trio-acp, the SDK or Python differ)")
        if message.get("import_env") != self.import_env:
            return self._refuse(conn, "import-time variables differ")
        if threading.active_count() != 1 or len(os.listdir("/proc/self/task")) != 1:
            return self._refuse(conn, "the server is not single-threaded")
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child (its coverage is in another process)
            self._child(conn, message, fds)
        self.launches += 1
        pidfd = os.pidfd_open(pid)
        self.children[pid] = (conn, pidfd)
        conn.settimeout(None)
        self.selector.register(conn, selectors.EVENT_READ, ("launcher", pid))
        self.selector.register(pidfd, selectors.EVENT_READ, ("child", pid))
        try:
            _send(conn, {"ok": True, "pid": pid, "server": os.getpid()})
        except OSError:  # the launcher gave up waiting: nobody relays for this child
            self.selector.unregister(conn)
            self._signal(pid, signal.SIGTERM)
        return True

    def _from_launcher(self, pid: int) -> None:
        conn, _ = self.children[pid]
        try:
            message, _ = _recv(conn)
        except (OSError, EOFError, ValueError, WarmError):
            # The launcher is gone (killed, even with SIGKILL): its client is gone too.
            # SIGTERM is the child's graceful stdin-EOF shutdown.
            self.selector.unregister(conn)
            self._signal(pid, signal.SIGTERM)
            return
        if message.get("op") == "signal" and int(message.get("signum", 0)) in RELAYED_SIGNALS:
            self._signal(pid, int(message["signum"]))

    def _signal(self, pid: int, signum: int) -> None:
        _, pidfd = self.children[pid]
        try:
            signal.pidfd_send_signal(pidfd, signum)
        except OSError:
            pass

    def _reap(self, pid: int) -> None:
        conn, pidfd = self.children.pop(pid)
        self.selector.unregister(pidfd)
        try:
            self.selector.unregister(conn)
        except (KeyError, ValueError):
            pass
        _, status = os.waitpid(pid, 0)
        os.close(pidfd)
        self.last_activity = time.monotonic()
        try:
            if os.WIFSIGNALED(status):
                _send(conn, {"signal": os.WTERMSIG(status)})
            else:
                _send(conn, {"exit": os.waitstatus_to_exitcode(status)})
        except OSError:
            pass
        conn.close()

    def _child(self, conn: socket.socket, message: dict[str, Any], fds: list[int]) -> None:
        code = 1
        try:
            code = _child_main(self, conn, message, fds)
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        except BaseException:
            import traceback

            traceback.print_exc()
        finally:
            try:
                sys.stderr.flush()
            except Exception:
                pass
            os._exit(code)


def _child_main(
    server: _Server, conn: socket.socket, message: dict[str, Any], fds: list[int]
) -> int:
    # Nothing of the server's survives into the session: its sockets, its signal handlers.
    server_pid = os.getppid()
    try:
        import ctypes

        ctypes.CDLL(None).prctl(1, signal.SIGTERM, 0, 0, 0)  # PR_SET_PDEATHSIG
    except Exception:
        pass
    if os.getppid() != server_pid:
        return 1
    server.selector.close()
    server.listener.close()
    for other_conn, pidfd in server.children.values():
        other_conn.close()
        os.close(pidfd)
    conn.close()
    server.lock.close()  # the lock is the server's life, not its children's
    os.setsid()
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGCHLD, signal.SIGPIPE):
        signal.signal(signum, signal.SIG_DFL)
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)  # as Python sets it up
    # The launcher's stdio, environment, cwd and umask.
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    os.environ.clear()
    os.environ.update(message.pop("env"))
    os.chdir(message["cwd"])
    os.umask(int(message["umask"]))
    argv = list(message["argv"])
    sys.argv = ["trio-acp", *argv]
    logging.getLogger().handlers.clear()
    from .cli import main

    return main(argv, warm=False)


def serve(idle: float | None = None) -> int:
    """`trio-acp warm serve`: run the warm server in the foreground."""
    from .credentials import withhold_agent_variables

    if not supported():
        print("trio-acp: warm start needs Linux", file=sys.stderr)
        return 2
    idle = float(os.environ.get("TRIO_ACP_WARM_IDLE", DEFAULT_IDLE)) if idle is None else idle
    # The server needs no credential; the children get the launchers' own.
    import_env = import_time_env(os.environ)
    withhold_agent_variables()
    logging.getLogger("trio_acp.warm").setLevel(logging.INFO)  # its lifecycle, on its stderr
    try:
        directory = private_dir(create=True)
    except (OSError, WarmError) as exc:
        print(f"trio-acp: cannot use the warm directory: {exc}", file=sys.stderr)
        return 1
    lock = open(directory / LOCK_NAME, "w")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        print(f"trio-acp: a warm server already runs in {directory}", file=sys.stderr)
        return 1
    start = time.perf_counter()
    loaded = fingerprint()
    _load()
    if threading.active_count() != 1:
        print("trio-acp: importing the SDK started threads; cannot fork safely", file=sys.stderr)
        return 1
    log.info("warm server: SDK imported in %.1f s", time.perf_counter() - start)
    import gc

    gc.collect()
    gc.freeze()  # the children's GC leaves the imported modules' pages shared
    path = directory / SOCKET_NAME
    try:
        os.unlink(path)  # stale: we hold the lock, so no live server owns it
    except FileNotFoundError:
        pass
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o177)
    try:
        listener.bind(str(path))
    finally:
        os.umask(old)
    os.chmod(path, 0o600)
    listener.listen(64)
    server = _Server(listener, idle, import_env, loaded)
    server.path = str(path)
    server.lock = lock
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, lambda *_: server.stop_accepting())
    print(f"trio-acp warm server {os.getpid()} ready on {path}", file=sys.stderr, flush=True)
    try:
        server.run()
    finally:
        server.stop_accepting()
    return 0


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
