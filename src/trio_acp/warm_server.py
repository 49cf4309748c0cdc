"""The warm server: imports the SDK once, then forks a child per launch (see warm.py).

The launcher side, the wire format and the private directory live in warm.py; this module
is what `trio-acp warm serve` runs. Like warm.py it imports neither trio nor the SDK at
the top: `_load` does, in the server's main thread, before the first fork.
"""

from __future__ import annotations

import fcntl
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
    LOCK_NAME,
    RELAYED_SIGNALS,
    SOCKET_NAME,
    WarmError,
    _peer_uid,
    _recv,
    _send,
    fingerprint,
    import_time_env,
    private_dir,
    supported,
)

log = logging.getLogger("trio_acp.warm")


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
        sdk.warm_first_call_imports()
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
