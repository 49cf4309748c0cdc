"""The warm server: imports the SDK once, then forks a child per launch (see warm.py).

The launcher side, the wire format and the private directory live in warm.py; what a child
takes from its launcher in warm_child.py; this module is what `trio-acp warm serve` runs.
Like warm.py it imports neither trio nor the SDK at the top: `_load` does, in the server's
main thread, before the first fork.

The server never blocks on a peer: every connection is read as its bytes come (a
selector, non-blocking sockets), a launch is answered right after its fork, and a
connection that has not sent a whole request within `_REQUEST_TIMEOUT` is dropped. A
child never waits on the server either: from its fork on it talks to its launcher only.
"""

from __future__ import annotations

import array
import base64
import fcntl
import json
import logging
import os
import selectors
import signal
import socket
import sys
import threading
import time
from typing import Any

from .warm import (
    DEFAULT_IDLE,
    RELAYED_SIGNALS,
    WarmError,
    _peer_uid,
    _recv,
    _send,
    address,
    decode,
    encode,
    fds_of,
    fingerprint,
    lock_name,
    private_dir,
    socket_name,
    supported,
)
from .warm_env import import_hashes, import_time_env, server_key

log = logging.getLogger("trio_acp.warm")

#: A connection must send its whole request within this (it is dropped otherwise).
_REQUEST_TIMEOUT = 10.0
_MAX_FDS = 4


def _load() -> None:
    """Import everything a child uses, in this (main) thread."""
    from .openhands import sdk

    sdk.import_sdk()
    import trio  # noqa: F401

    from . import cli, server, warm_child  # noqa: F401

    # The server module imports the agent only once `initialize` is answered
    # (openhands/front.py): a child must find it imported.
    from .openhands import agent  # noqa: F401

    # What a process's first model call imports lazily (the session warm-up does it again
    # in each child, then at no cost): the OpenAI client's resources, litellm's pydantic
    # types. Best effort: the session's own warm-up covers whatever this misses.
    try:
        sdk.warm_first_call_imports()
    except Exception:
        log.debug("warm server: could not warm the model call path", exc_info=True)
    # And what a child's first session build imports (its session/new waited for them).
    try:
        sdk.warm_session_build_imports()
    except Exception:
        log.debug("warm server: could not warm the session build", exc_info=True)


class _Pending:
    """A connection whose request is still arriving."""

    def __init__(self, conn: socket.socket) -> None:
        self.conn = conn
        self.data = b""
        self.fds: list[int] = []
        self.since = time.monotonic()

    def close(self) -> None:
        for fd in self.fds:
            os.close(fd)
        self.fds = []
        self.conn.close()


def _send_now(conn: socket.socket, message: dict[str, Any]) -> bool:
    """Send a small message without waiting (a fresh socket's buffer takes it whole)."""
    try:
        data = encode(message)
        return conn.send(data) == len(data)
    except OSError:
        return False


class _Server:
    def __init__(
        self,
        listener: socket.socket,
        idle: float,
        import_env: dict[str, str],
        fingerprint: str,
        wakeup: socket.socket,
    ) -> None:
        self.listener = listener
        self.idle = idle
        self.import_env = import_env
        self.fingerprint = fingerprint  # of the files as they were before the import
        self.started = time.time()
        self.last_activity = time.monotonic()
        self.running = True
        self.selector = selectors.DefaultSelector()
        self.pending: dict[int, _Pending] = {}  # fd → a connection still sending
        self.children: dict[int, tuple[socket.socket, int]] = {}  # pid → (launcher, pidfd)
        self.launches = 0
        self.wakeup = wakeup
        self.wakeup_write: socket.socket | None = None
        self.path = ""
        self.lock: Any = None

    def run(self) -> None:
        self.selector.register(self.listener, selectors.EVENT_READ, ("accept", None))
        self.selector.register(self.wakeup, selectors.EVENT_READ, ("wakeup", None))
        next_check = time.monotonic() + 10
        while self.running:
            for key, _ in self.selector.select(1.0):
                kind, data = key.data
                try:
                    if kind == "accept":
                        self._accept()
                    elif kind == "request":
                        self._read(data)
                    elif kind == "child":
                        self._reap(data)
                    elif kind == "wakeup":
                        self.wakeup.recv(4096)  # a signal: its handler has run
                except Exception:
                    log.exception("warm server: %s failed", kind)
                if not self.running:
                    break
            now = time.monotonic()
            for fd, pending in list(self.pending.items()):
                if now - pending.since > _REQUEST_TIMEOUT:
                    log.warning("warm server: dropped a connection that sent no whole request")
                    self._drop(fd)
            if not self.children and now - self.last_activity > self.idle:
                log.info("warm server: idle for %.0f s, exiting", self.idle)
                self.running = False
            if now >= next_check:
                next_check = now + 10
                if fingerprint(cached=False) != self.fingerprint:
                    log.info("warm server: trio-acp or the SDK changed, exiting")
                    self.running = False

    def stop(self, why: str) -> None:
        if self.running:
            log.info("warm server: %s, exiting", why)
        self.running = False

    def close(self) -> None:
        """Leave: the socket goes (if it is still ours); running children go on."""
        try:
            st = os.stat(self.path)
            if (st.st_dev, st.st_ino) == self.socket_id:
                os.unlink(self.path)
        except OSError:
            pass
        self.listener.close()
        for fd in list(self.pending):
            self._drop(fd)

    socket_id: tuple[int, int] = (0, 0)

    def _accept(self) -> None:
        try:
            conn, _ = self.listener.accept()
        except BlockingIOError:
            return
        conn.setblocking(False)
        try:
            if _peer_uid(conn) != os.getuid():
                raise WarmError("peer is another user")
        except (OSError, WarmError) as exc:
            log.warning("warm server: rejected a connection: %s", exc)
            conn.close()
            return
        self.last_activity = time.monotonic()
        self.pending[conn.fileno()] = _Pending(conn)
        self.selector.register(conn, selectors.EVENT_READ, ("request", conn.fileno()))

    def _drop(self, fd: int) -> None:
        pending = self.pending.pop(fd)
        self.selector.unregister(pending.conn)
        pending.close()

    def _read(self, fd: int) -> None:
        pending = self.pending[fd]
        fd_size = array.array("i").itemsize
        try:
            data, ancdata, flags, _ = pending.conn.recvmsg(
                1 << 16, socket.CMSG_SPACE(_MAX_FDS * fd_size)
            )
        except BlockingIOError:
            return
        except OSError:
            self._drop(fd)
            return
        pending.fds.extend(fds_of(ancdata))
        if not data or flags & socket.MSG_CTRUNC:
            self._drop(fd)
            return
        pending.data += data
        try:
            message, rest = decode(pending.data)
        except (ValueError, WarmError) as exc:
            log.warning("warm server: rejected a connection: %s", exc)
            self._drop(fd)
            return
        if message is None:
            return
        # A whole request: from here the connection is answered, or becomes a child's.
        self.pending.pop(fd)
        self.selector.unregister(pending.conn)
        conn, fds = pending.conn, pending.fds
        pending.fds = []
        kept = False
        try:
            op = message.get("op")
            if op == "status":
                _send_now(conn, self.status())
            elif op == "stop":
                _send_now(conn, {"ok": True, "pid": os.getpid(), "children": len(self.children)})
                self.stop("asked to stop")
            elif op == "launch":
                kept = self._launch(conn, message, fds)
            else:
                _send_now(conn, {"ok": False, "reason": f"unknown op {op!r}"})
        except Exception as exc:
            log.warning("warm server: %s request failed: %s", message.get("op"), exc)
        finally:
            for passed in fds:
                os.close(passed)
        if not kept:
            conn.close()

    def status(self) -> dict[str, Any]:
        from . import __version__

        return {
            "ok": True,
            "pid": os.getpid(),
            "version": __version__,
            "fingerprint": self.fingerprint,
            "current": fingerprint(cached=False) == self.fingerprint,
            "children": len(self.children),
            "launches": self.launches,
            "uptime": round(time.time() - self.started, 1),
            "idle_timeout": self.idle,
            "threads": threading.active_count(),
        }

    def _refuse(self, conn: socket.socket, reason: str) -> bool:
        log.info("warm server: refused a launch: %s", reason)
        _send_now(conn, {"ok": False, "reason": reason})
        return False

    def _launch(self, conn: socket.socket, message: dict[str, Any], fds: list[int]) -> bool:
        if len(fds) != 1:
            return self._refuse(conn, "expected the launcher's channel")
        if message.get("fingerprint") != self.fingerprint:
            # A launcher from another version or install: a server left behind by an
            # upgrade goes away.
            if fingerprint(cached=False) != self.fingerprint:
                self.stop("trio-acp or the SDK changed")
            return self._refuse(conn, "stale server (trio-acp, the SDK or Python differ)")
        if message.get("import_env") != self.import_env:
            return self._refuse(conn, "import-time variables differ")
        if threading.active_count() != 1 or len(os.listdir("/proc/self/task")) != 1:
            return self._refuse(conn, "the server is not single-threaded")
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child (its coverage is in another process)
            self._child(message, fds[0])
        self.launches += 1
        self.last_activity = time.monotonic()
        pidfd = os.pidfd_open(pid)
        self.children[pid] = (conn, pidfd)
        self.selector.register(pidfd, selectors.EVENT_READ, ("child", pid))
        # The launcher may have given up already: then the child finds its channel closed
        # and exits without touching anything (warm.py, the hand-over).
        _send_now(conn, {"ok": True, "pid": pid, "server": os.getpid()})
        return True

    def _reap(self, pid: int) -> None:
        conn, pidfd = self.children.pop(pid)
        self.selector.unregister(pidfd)
        _, status = os.waitpid(pid, 0)
        os.close(pidfd)
        self.last_activity = time.monotonic()
        # The child reports its exit itself; this is for a child that died of a signal.
        if os.WIFSIGNALED(status):
            log.info("warm server: child %d died of signal %d", pid, os.WTERMSIG(status))
            _send_now(conn, {"signal": os.WTERMSIG(status)})
        else:
            _send_now(conn, {"exit": os.waitstatus_to_exitcode(status)})
        conn.close()

    def _child(self, message: dict[str, Any], channel_fd: int) -> None:
        code = 0
        channel = None
        try:
            channel = socket.socket(fileno=channel_fd)
            code = _child_main(self, channel, message)
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        except BaseException:
            import traceback

            traceback.print_exc()
            code = 1
        finally:
            try:
                if channel is not None:
                    channel.setblocking(True)
                    _send(channel, {"exit": code})
            except Exception:
                pass
            try:
                sys.stdout.flush()
                sys.stderr.flush()
            except Exception:
                pass
            os._exit(code)


def _child_main(server: _Server, channel: socket.socket, message: dict[str, Any]) -> int:
    from .warm_child import ChildSetupError, apply_rlimits, take_environment_block

    # Nothing of the server's survives into the session: its sockets, its lock, its
    # signal handlers.
    signal.set_wakeup_fd(-1)
    server.selector.close()
    server.listener.close()
    server.wakeup.close()
    if server.wakeup_write is not None:
        server.wakeup_write.close()
    for pending in server.pending.values():
        pending.close()
    for conn, pidfd in server.children.values():
        conn.close()
        os.close(pidfd)
    server.lock.close()  # the lock is the server's life, not its children's
    os.setsid()
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGCHLD):
        signal.signal(signum, signal.SIG_DFL)
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)  # as Python sets it up
    channel.setblocking(True)
    # The launcher's state, all of it before the claim: what cannot be taken refuses the
    # launch while the launcher can still start cold.
    try:
        os.environ.clear()
        os.environ.update(message["env"])
        took = take_environment_block(
            base64.b64decode(message.get("environ_block", "")),
            base64.b64decode(message.get("cmdline", "")),
        )
        if not took:
            log.debug("warm child: the kernel kept the server's environment block (zeroed)")
        apply_rlimits(message.get("rlimits", {}))
        os.chdir(message["cwd"])
        os.umask(int(message["umask"]))
    except (ChildSetupError, OSError) as exc:
        _send(channel, {"refuse": str(exc)})
        return 0
    import tempfile

    tempfile.tempdir = None  # computed again from the launcher's TMPDIR
    _send(channel, {"claim": os.getpid()})
    # The one step that decides (warm.py): the launcher's stdio, or end-of-file if it gave up.
    try:
        go, fds = _recv(channel, max_fds=3)
    except (OSError, EOFError, ValueError, WarmError):
        return 0
    if not go.get("go") or len(fds) != 3:
        for fd in fds:
            os.close(fd)
        return 0
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    threading.Thread(target=_watch_launcher, args=(channel,), daemon=True).start()
    argv = list(message["argv"])
    sys.argv = ["trio-acp", *argv]
    logging.getLogger().handlers.clear()
    from . import cli
    from .openhands.sessions import deferred_build

    # Its SDK is imported: it answers session/new before building the session, as a cold
    # launch does (sessions/deferred_build.py).
    deferred_build.answer_before_build()
    # The serving path leaves through cli._exit_now, never returning here.
    cli.before_exit = lambda code: _send(channel, {"exit": code})
    return cli.main(argv, warm=False)


def _watch_launcher(channel: socket.socket) -> None:
    """The launcher relays its signals here; its death (end-of-file, even after SIGKILL)
    means its client is gone: SIGTERM, the graceful shutdown."""
    while True:
        try:
            message, _ = _recv(channel)
        except (OSError, EOFError, ValueError, WarmError):
            os.kill(os.getpid(), signal.SIGTERM)
            return
        signum = int(message.get("signal", 0))
        if signum in RELAYED_SIGNALS:
            os.kill(os.getpid(), signum)


def _take_lock(path: str) -> Any:
    """The server's lock (its life: held until it exits), or None if another server holds
    it. A launcher probing it (warm.lock_holder) holds it shared for microseconds: retried."""
    lock = open(os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600), "r+")
    deadline = time.monotonic() + 1.0
    while True:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return lock
        except OSError:
            if time.monotonic() > deadline:
                lock.close()
                return None
            time.sleep(0.02)


def serve(idle: float | None = None) -> int:
    """`trio-acp warm serve`: run the warm server in the foreground."""
    from .credentials import withhold_agent_variables

    if not supported():
        print("trio-acp: warm start needs Linux", file=sys.stderr)
        return 2
    idle = float(os.environ.get("TRIO_ACP_WARM_IDLE", DEFAULT_IDLE)) if idle is None else idle
    import_env = import_time_env(os.environ)
    loaded = fingerprint()
    key = server_key(loaded, os.environ)
    # The server needs no credential; the children get the launchers' own.
    withhold_agent_variables()
    logging.getLogger("trio_acp.warm").setLevel(logging.INFO)  # its lifecycle, on its stderr
    try:
        directory = private_dir(create=True)
    except (OSError, WarmError) as exc:
        print(f"trio-acp: cannot use the warm directory: {exc}", file=sys.stderr)
        return 1
    lock = _take_lock(str(directory / lock_name(key)))
    if lock is None:
        print(
            f"trio-acp: a warm server for this environment already runs in {directory}",
            file=sys.stderr,
        )
        return 1
    # Who holds the lock, for `warm stop` and `warm status` (never a value: hashes).
    lock.seek(0)
    lock.truncate()
    lock.write(json.dumps({"pid": os.getpid(), "import_hashes": import_hashes(os.environ)}))
    lock.flush()
    start = time.perf_counter()
    _load()
    if threading.active_count() != 1:
        print("trio-acp: importing the SDK started threads; cannot fork safely", file=sys.stderr)
        return 1
    log.info("warm server %s: SDK imported in %.1f s", key, time.perf_counter() - start)
    import gc

    gc.collect()
    gc.freeze()  # the children's GC leaves the imported modules' pages shared
    dir_fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    path = address(directory, socket_name(key), dir_fd)
    try:
        os.unlink(path)  # stale: we hold the lock, so no live server owns it
    except FileNotFoundError:
        pass
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o177)
    try:
        listener.bind(path)
    finally:
        os.umask(old)
    os.chmod(path, 0o600)
    listener.listen(128)
    listener.setblocking(False)
    wakeup_read, wakeup_write = socket.socketpair()
    wakeup_read.setblocking(False)
    wakeup_write.setblocking(False)
    server = _Server(listener, idle, import_env, loaded, wakeup_read)
    server.path = path
    server.wakeup_write = wakeup_write
    st = os.stat(path)
    server.socket_id = (st.st_dev, st.st_ino)
    server.lock = lock
    # A signal wakes the loop (set_wakeup_fd) and ends it: SIGTERM always stops a server.
    signal.set_wakeup_fd(wakeup_write.fileno(), warn_on_full_buffer=False)
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, lambda signum, _frame: server.stop(f"signal {signum}"))
    print(
        f"trio-acp warm server {os.getpid()} ready on {directory / socket_name(key)}",
        file=sys.stderr,
        flush=True,
    )
    try:
        server.run()
    finally:
        server.close()
        os.close(dir_fd)
    # Leave at once, the lock still held: it is released by the exit itself, so that `warm
    # stop` (which waits for the lock) never reports a server stopped while the interpreter
    # still tears the SDK's modules down (seconds).
    logging.shutdown()
    sys.stderr.flush()
    os._exit(0)
