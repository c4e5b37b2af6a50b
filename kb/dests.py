"""Which option stands for a dest that several flags share.

At snapshot-2026-07-01 SGLang has 13 such dests: mostly a deprecated alias beside the live
flag, but also two live flags writing one field (`--speculative-draft-window-size` and
`--speculative-dflash-draft-window-size`). Every dest -> option map uses this one rule, so a
condition, a read and the docs drift name the same flag.
"""

from __future__ import annotations


def dest_rank(name: str, dest: str, deprecated: bool | None) -> tuple[bool, bool]:
    """Sort key, best last: a live flag over a deprecated one, then the option spelled like its
    dest (`--x-y` for `x_y`); remaining ties keep their order (the source's)."""
    return (not deprecated, name == "--" + dest.replace("_", "-"))
