"""Child processes that die with their parent (Linux), for the ingest's pool workers and
`git cat-file` children and for the server's workers; and a directory removed when this
process ends, however it ends (`remove_when_gone`).

A `kill -9` of the parent runs none of its clean-up code, so the children must learn of it
from the kernel: prctl(PR_SET_PDEATHSIG) asks for a signal when the parent goes. Elsewhere
(no prctl) this is a no-op and children end when their pipes close, as before.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
from typing import Any

PR_SET_PDEATHSIG = 1


def _load_prctl() -> Any:
    # Resolved once at import: the call itself may run between fork and exec (preexec_fn),
    # where loading a library is best avoided.
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


_prctl = _load_prctl()


def die_with_parent(sig: int = signal.SIGKILL, parent: int | None = None) -> None:
    """Ask the kernel to send `sig` to this process when its parent exits.

    Call it in the child (a pool initializer, or `preexec_fn` of a subprocess). `parent` is
    the pid the child was started by: if it is already gone (the race between fork and
    prctl), the child exits at once.
    """
    if _prctl is None:
        return
    _prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0)
    if parent is not None and os.getppid() != parent:
        os._exit(1)


def exit_with(pid: int) -> None:
    """End this process as soon as process `pid` exits, whether or not it is our parent (a
    pool worker started by a fork server outlives the ingest that asked for it otherwise).

    A daemon thread waits on a pidfd (Linux 5.3+); elsewhere this is a no-op.
    """
    import select
    import threading

    try:
        fd = os.pidfd_open(pid)  # type: ignore[attr-defined,unused-ignore]
    except ProcessLookupError:
        os._exit(1)
    except (AttributeError, OSError):
        return

    def wait() -> None:
        select.select([fd], [], [])
        os._exit(1)

    threading.Thread(target=wait, daemon=True, name=f"exit-with-{pid}").start()


_janitors: dict[str, subprocess.Popen[bytes]] = {}  # path -> the process that will remove it


def remove_when_gone(path: str) -> None:
    """Remove the directory `path` when this process ends, however it ends.

    A `kill -9` runs none of this process's clean-up code (multiprocessing removes its
    temporary directory, which holds the fork server's socket, from an atexit hook). So a
    `sh` child waits on a pipe that only this process holds, which the kernel closes when
    the process exits, and then removes `path`. The child has its own session, so that a
    Ctrl-C in the terminal does not end it first. Once per path and process.
    """
    if path in _janitors:
        return
    read, write = os.pipe()  # neither end is inherited by other children (O_CLOEXEC)
    try:
        _janitors[path] = subprocess.Popen(
            ["sh", "-c", 'read _; rm -rf -- "$1"', "remove-when-gone", path],
            stdin=read,
            stdout=subprocess.DEVNULL,  # nor does it hold a pipe the caller reads to its end
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
    finally:
        os.close(read)
    # `write` stays open (and unreferenced) for the life of this process: its end is the signal.
