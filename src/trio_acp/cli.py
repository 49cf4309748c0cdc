"""`trio-acp`: serve the OpenHands agent over stdio (the default), or run the demo."""

from __future__ import annotations

import os
import signal
import sys

from . import __version__

TYPE_CHECKING = False  # not `typing`'s: a launch would import it for nothing (warm.py)

if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable

    from .credentials import SecretValues

# trio, the credentials module and everything else are imported where they are used: a
# launch served by the warm server (warm.py) only parses its arguments and hands its stdio
# over, and should not pay for imports it never uses.

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"

#: Called with the exit status right before `_exit_now` leaves: a warm child reports it to
#: its launcher (warm_server.py), which exits with it.
before_exit: Callable[[int], None] | None = None


def _configure_logging(
    level: str, log_file: str | None, secrets: SecretValues | None = None
) -> None:
    import logging

    # Logs never touch stdout: stderr always, and a file when asked. The agent's
    # credentials are masked in both (see credentials.py).
    handlers: list[logging.Handler] = [logging.StreamHandler(sys.stderr)]
    if log_file:
        handlers.append(logging.FileHandler(log_file, encoding="utf-8"))
    from .credentials import MaskingFormatter, SecretValues

    formatter = MaskingFormatter(secrets if secrets is not None else SecretValues(), LOG_FORMAT)
    for handler in handlers:
        handler.setFormatter(formatter)
    logging.basicConfig(
        level=getattr(logging, level.upper(), logging.WARNING),
        handlers=handlers,
        force=True,
    )


def _exit_now(code: int) -> None:
    """Leave without tearing down the interpreter.

    Everything is closed by now (sessions, tools, the protocol stream), but the
    interpreter's own teardown — garbage-collecting the SDK's and litellm's huge module
    graph — takes ~2 s, and an editor waiting for the agent to exit after closing its
    stdin should not wait for that.
    """
    import logging

    logging.shutdown()
    if before_exit is not None:
        try:
            before_exit(code)
        except Exception:
            pass
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    # Nor for the kernel to free the address space (~300 MiB): a keeper process that
    # shares it frees it after we are gone (exit_handoff.py).
    from .exit_handoff import hand_off_memory

    try:
        hand_off_memory()
    except Exception:
        pass
    os._exit(code)


def build_parser() -> argparse.ArgumentParser:
    import argparse

    parser = argparse.ArgumentParser(
        prog="trio-acp",
        description="An ACP (Agent Client Protocol v1) agent running OpenHands, for editors "
        "that launch agents over stdio. With no command it serves ACP on stdin/stdout.",
    )
    parser.add_argument("--version", action="version", version=f"trio-acp {__version__}")
    parser.add_argument(
        "--log-level",
        default=os.environ.get("TRIO_ACP_LOG_LEVEL", "WARNING"),
        help="log level for stderr and the log file (default: WARNING, or $TRIO_ACP_LOG_LEVEL)",
    )
    parser.add_argument(
        "--log-file",
        default=os.environ.get("TRIO_ACP_LOG_FILE"),
        help="also write logs to this file (default: $TRIO_ACP_LOG_FILE)",
    )
    server_help = (
        "run every new session's conversation on this OpenHands agent-server "
        "(http(s)://host:port; its key from $TRIO_ACP_AGENT_SERVER_API_KEY; default: "
        "$TRIO_ACP_AGENT_SERVER_URL, else agent_server.json, else in this process; "
        "docs/agent-server.md)"
    )
    parser.add_argument("--agent-server", metavar="URL", default=None, help=server_help)
    setup_help = (
        "configure the model on this terminal (model, base URL, API key) and save it to "
        "agent_settings.json, then exit; what ACP's terminal authentication runs"
    )
    parser.add_argument("--setup", action="store_true", help=setup_help)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    serve = sub.add_parser("serve", help="serve ACP on stdio (the default)")
    # A client appends the terminal auth method's args to the command it was configured
    # with, which may already name `serve`.
    serve.add_argument("--setup", action="store_true", help=setup_help)
    serve.add_argument("--agent-server", metavar="URL", default=argparse.SUPPRESS, help=server_help)
    sub.add_parser("setup", help=setup_help)
    demo = sub.add_parser(
        "demo",
        help="run a full ACP session against trio-acp on a scripted model (no API key needed)",
    )
    demo.add_argument("--keep", action="store_true", help="keep the demo's workspace directory")
    warm = sub.add_parser(
        "warm",
        help="manage the warm server that new launches attach to, skipping the SDK import "
        "(see README, Warm start)",
    )
    warm.add_argument(
        "action",
        choices=["start", "stop", "status", "serve"],
        help="start it in the background, stop it, show it; serve: run it here",
    )
    warm.add_argument(
        "--idle",
        type=float,
        default=None,
        help="exit after this many seconds without a launch (default: "
        "$TRIO_ACP_WARM_IDLE, else 1800)",
    )
    agent_server = sub.add_parser(
        "agent-server",
        help="run an OpenHands agent-server for trio-acp's sessions, its keys generated into "
        "a 0600 file and kept out of its environment (docs/agent-server.md)",
    )
    agent_server.add_argument("--host", default="127.0.0.1", help="default: 127.0.0.1")
    agent_server.add_argument("--port", type=int, default=8000, help="default: 8000")
    agent_server.add_argument(
        "--dir",
        default=None,
        help="its keys and storage (default: $OPENHANDS_PERSISTENCE_DIR/agent-server)",
    )
    agent_server.add_argument(
        "--user",
        default=None,
        help="started as root: run the server and its tools as this user, who cannot read the keys",
    )
    agent_server.add_argument(
        "--configure",
        action="store_true",
        help="also write agent_server.json, so trio-acp's new sessions run on this server",
    )
    sub.add_parser(
        "conformance",
        help="run the ACP conformance suite against an agent command: "
        "trio-acp conformance [options] -- AGENT COMMAND... (see `trio-acp conformance --help`)",
        add_help=False,
    )
    return parser


def _warm_launch(argv: list[str]) -> int | None:
    """The child's exit status if the warm server serves this launch (warm.py), else None."""
    from . import warm as warm_start

    return warm_start.launch(argv) if warm_start.enabled() else None


def main(argv: list[str] | None = None, *, warm: bool = True) -> int:
    """The command line. `warm=False`: never hand this launch to the warm server (its
    children run this with the launcher's argv)."""
    # No signal blocked from here on: a mask is inherited across exec and by every thread
    # and process this one starts; a parent that left SIGINT blocked made every terminal
    # command (and the agent-server's) deaf to the interrupt that stops it.
    signal.pthread_sigmask(signal.SIG_SETMASK, ())
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        # Inherited ignored (Python then leaves it so): the SDK's shells on an agent-server
        # would inherit it too. SIGINT stops trio-acp gracefully (stdio.py).
        try:
            signal.signal(signal.SIGINT, signal.default_int_handler)
        except ValueError:  # called in-process from a thread other than the main one
            pass
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["conformance"]:
        # The suite has options of its own and takes the agent command after `--`.
        from trio_acp_conformance.runner import main as conformance_main

        return conformance_main(argv[1:], prog="trio-acp conformance")
    # What an editor launches (no arguments): straight to the warm server, before argparse
    # and logging are even imported (a launch pays its own imports: bench/README.md, "Warm
    # start"). Failing to attach says why in one line on stderr; the ordinary start follows.
    plain = argv in ([], ["serve"])
    if plain and warm and (code := _warm_launch(argv)) is not None:
        return code
    args = build_parser().parse_args(argv)
    serving = args.command in (None, "serve") and not args.setup
    if serving and warm and not plain and (code := _warm_launch(argv)) is not None:
        return code
    if args.command == "warm":
        from . import warm as warm_start

        _configure_logging(args.log_level, args.log_file)
        if args.action == "serve":
            from . import warm_server

            return warm_server.serve(args.idle)
        if args.action == "start":
            return warm_start.start(args.idle)
        try:
            return warm_start.stop() if args.action == "stop" else warm_start.status()
        except BrokenPipeError:
            # `trio-acp warm status | head`: the reader left; say nothing more, and keep
            # Python from complaining again when it flushes stdout at exit.
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return 0
    import trio

    from .credentials import SecretValues

    secrets = SecretValues()
    _configure_logging(args.log_level, args.log_file, secrets)
    if args.setup or args.command == "setup":
        from .openhands.setup.terminal_setup import run_setup

        return run_setup()
    if args.command in (None, "serve"):
        from .credentials import MaskingTextStream, model_key_variables, withhold_agent_variables
        from .server import serve_main

        # First, before any thread or child process exists: no tool the agent starts may
        # inherit its credentials. The agent reads its settings from the snapshot.
        env = withhold_agent_variables()
        # The other models' keys are masked like the default's (credentials.py).
        secrets.add(
            env[name] for name in model_key_variables(env) - {"TRIO_ACP_MODELS"} if env.get(name)
        )
        sys.stderr = MaskingTextStream(sys.stderr, secrets)
        trio.run(serve_main, env, secrets, args.agent_server)
        _exit_now(0)
    if args.command == "agent-server":
        from .openhands.backends.agent_server_command import serve as serve_agent_server

        return serve_agent_server(
            host=args.host,
            port=args.port,
            directory=args.dir,
            user=args.user,
            configure=args.configure,
        )
    if args.command == "demo":
        from .demo import demo_main

        return trio.run(demo_main, args.keep)
    raise AssertionError(args.command)


if __name__ == "__main__":
    sys.exit(main())
