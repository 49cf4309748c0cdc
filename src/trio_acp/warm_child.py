"""What a warm child takes from its launcher before it serves: the process-level state that
`fork()` copies from the warm server and `os.environ` alone does not replace.

- **The environment block.** `/proc/<pid>/environ` (what `ps e`, and any tool reading it,
  shows) is the memory range the kernel recorded at `exec`, never `os.environ`. After a
  fork it is the warm server's block. Re-exec would give the child a block of its own but
  would lose the SDK import, the reason the server exists. So the child copies the
  launcher's block, byte for byte, into memory of its own and points the kernel at it with
  `prctl(PR_SET_MM, PR_SET_MM_MAP)` (Linux >= 3.18 with CONFIG_CHECKPOINT_RESTORE; no
  privilege needed while the executable is left as it is), and its command line likewise
  (`/proc/<pid>/cmdline`: the launcher's). The server's own block is zeroed in the child. Where the
  kernel refuses, the child's `/proc/<pid>/environ` shows the server's block zeroed: no
  value of the server's, and none of the launcher's; the server itself is started with a
  minimal environment (warm.py, `server_environment`), so even that holds no credential.
- **Resource limits.** `fork` copies the server's; the child sets the launcher's (every
  `RLIMIT_*`, soft and hard). A hard limit above the server's cannot be raised without
  privilege: the child then refuses the launch, which starts the ordinary way.

Linux only, like warm start. Imports neither trio nor the SDK.
"""

from __future__ import annotations

import ctypes
import logging
import mmap
import resource

log = logging.getLogger("trio_acp.warm")

_PR_SET_MM = 35
_PR_SET_MM_MAP = 14
_MM_FIELDS = (
    "start_code end_code start_data end_data start_brk brk start_stack "
    "arg_start arg_end env_start env_end auxv"
).split()


class _MMMap(ctypes.Structure):
    # struct prctl_mm_map (include/uapi/linux/prctl.h)
    _fields_ = [(name, ctypes.c_uint64) for name in _MM_FIELDS] + [
        ("auxv_size", ctypes.c_uint32),
        ("exe_fd", ctypes.c_uint32),
    ]


class ChildSetupError(Exception):
    """The child cannot take the launcher's state: the launch is refused (it starts cold)."""


#: Memory the kernel's environ/cmdline pointers refer to: it must live as long as the process.
_KEPT: list[mmap.mmap] = []


def apply_rlimits(wanted: dict[str, list[int]]) -> None:
    """Set the launcher's limits here; a hard limit the child cannot reach refuses the launch."""
    for name, (soft, hard) in wanted.items():
        which = getattr(resource, name, None)
        if not isinstance(which, int):
            continue
        if tuple(resource.getrlimit(which)) == (soft, hard):
            continue
        try:
            resource.setrlimit(which, (soft, hard))
        except (OSError, ValueError) as exc:
            raise ChildSetupError(
                f"cannot set {name} to the launcher's {soft}/{hard} "
                f"(the warm server's is {resource.getrlimit(which)}): {exc}"
            ) from None


def _stat_fields() -> list[int]:
    """/proc/self/stat by field number (proc(5)); the non-numeric ones as 0."""
    with open("/proc/self/stat", "rb") as f:
        stat = f.read()
    # The fields after the command name (in parentheses, and it may hold anything): the
    # first of them is field 3, the state, a letter.
    rest = stat[stat.rindex(b")") + 2 :].split()
    return [0, 0, 0] + [int(x) if x.lstrip(b"-").isdigit() else 0 for x in rest]


def _private_copy(data: bytes) -> tuple[mmap.mmap, int]:
    # MAP_PRIVATE: the kernel reads environ/cmdline with FOLL_ANON, which a shared mapping
    # (Python's default for anonymous maps) does not satisfy.
    region = mmap.mmap(-1, max(len(data), 1), flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    region.write(data)
    _KEPT.append(region)
    return region, ctypes.addressof(ctypes.c_char.from_buffer(region))


def take_environment_block(environ: bytes, cmdline: bytes) -> bool:
    """Make `/proc/self/environ` show `environ` and `/proc/self/cmdline` show `cmdline`
    (the launcher's raw blocks). True if the kernel took them; else the server's block is
    only zeroed (see the module docstring)."""
    fields = _stat_fields()
    old_env_start, old_env_end = fields[50], fields[51]
    libc = ctypes.CDLL(None, use_errno=True)
    libc.sbrk.restype = ctypes.c_void_p
    libc.sbrk.argtypes = [ctypes.c_long]
    took = False
    try:
        _, env_at = _private_copy(environ)
        _, arg_at = _private_copy(cmdline)
        mm = _MMMap(
            start_code=fields[26],
            end_code=fields[27],
            start_data=fields[45],
            end_data=fields[46],
            start_brk=fields[47],
            brk=libc.sbrk(0) or fields[47],
            start_stack=fields[28],
            arg_start=arg_at if cmdline else fields[48],
            arg_end=arg_at + len(cmdline) if cmdline else fields[49],
            env_start=env_at,
            env_end=env_at + len(environ),
            auxv=0,
            auxv_size=0,
            exe_fd=0xFFFFFFFF,  # -1: keep the executable (changing it needs privilege)
        )
        if libc.prctl(_PR_SET_MM, _PR_SET_MM_MAP, ctypes.byref(mm), ctypes.sizeof(mm), 0) == 0:
            took = True
        else:
            log.debug("PR_SET_MM_MAP failed: errno %d", ctypes.get_errno())
    except Exception:
        log.debug("could not set the environment block", exc_info=True)
    if 0 < old_env_start < old_env_end:
        # The server's block: nothing points at it any more (os.environ is the launcher's).
        ctypes.memset(old_env_start, 0, old_env_end - old_env_start)
    return took
