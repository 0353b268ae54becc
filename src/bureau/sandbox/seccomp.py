"""A seccomp filter that stops sandboxed code from creating user namespaces and memfds.

Without it, an agent can `unshare -Ur` into a user namespace of its own, become "root" there and
mount a tmpfs sized at half the machine's RAM, which no storage limit of ours sees (RLIMIT_FSIZE
caps only each file). New user namespaces are also where much of the kernel's attack surface
lies, which is why container runtimes filter them too. The filter:

- fails `unshare` and `clone` with EPERM when their flags ask for CLONE_NEWUSER;
- answers `clone3` with ENOSYS, as Docker's default profile does: its flags sit in memory that
  a filter cannot read, and the C library then falls back to `clone`;
- answers `memfd_create` and `memfd_secret` with ENOSYS: a memfd is memory that no limit of a
  sandbox counts (not the address space until mapped, not the storage tmpfs), so an agent could
  hold gigabytes in unmapped memfds; software that uses them falls back to files (/tmp, /dev/shm,
  which the storage limit bounds) when the call does not exist;
- fails every call made through another ABI (i386 or x32 on x86-64), which would otherwise
  reach the same calls by other numbers; 32-bit programs therefore do not run.

It is a classic BPF program (no libseccomp needed), handed to bwrap with `--seccomp FD`. On an
architecture it does not know, `program()` returns None and sandboxes run without it.
"""

from __future__ import annotations

import errno
import platform
import struct
from dataclasses import dataclass

_LD_ABS, _JEQ, _JGE, _JSET, _RET = 0x20, 0x15, 0x35, 0x45, 0x06
_ALLOW = 0x7FFF0000
_ERRNO = 0x00050000
_CLONE_NEWUSER = 0x10000000
_X32_BIT = 0x40000000
# seccomp_data: nr at 0, arch at 4, args[0] at 16 (its low 32 bits on little-endian).
_NR, _ARCH, _ARG0 = 0, 4, 16


@dataclass(frozen=True)
class Arch:
    audit: int
    unshare: int
    clone: int
    clone3: int
    memfd_create: int
    memfd_secret: int


_ARCHES = {
    "x86_64": Arch(0xC000003E, 272, 56, 435, 319, 447),
    "aarch64": Arch(0xC00000B7, 97, 220, 435, 279, 447),
}


def _op(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def program(machine: str | None = None) -> bytes | None:
    """The filter for this machine's architecture, as bwrap reads it from its fd."""
    arch = _ARCHES.get(machine or platform.machine())
    if arch is None:
        return None
    x32 = _X32_BIT if arch.audit == _ARCHES["x86_64"].audit else 0xFFFFFFFF
    # Instructions with symbolic jump targets, resolved below (a jump skips that many
    # instructions after itself).
    code: list[tuple[int, int, str | None, str | None]] = [
        (_LD_ABS, _ARCH, None, None),
        (_JEQ, arch.audit, None, "eperm"),  # a foreign ABI (i386 on x86-64)
        (_LD_ABS, _NR, None, None),
        (_JGE, x32, "eperm", None),  # the x32 ABI
        (_JEQ, arch.clone3, "enosys", None),
        (_JEQ, arch.memfd_create, "enosys", None),
        (_JEQ, arch.memfd_secret, "enosys", None),
        (_JEQ, arch.unshare, "flags", None),
        (_JEQ, arch.clone, "flags", None),
        (_RET, _ALLOW, None, None),
        (_LD_ABS, _ARG0, None, None),  # flags
        (_JSET, _CLONE_NEWUSER, "eperm", None),
        (_RET, _ALLOW, None, None),
        (_RET, _ERRNO | errno.EPERM, None, None),  # eperm
        (_RET, _ERRNO | errno.ENOSYS, None, None),  # enosys
    ]
    labels = {"flags": 10, "eperm": 13, "enosys": 14}

    def offset(here: int, label: str | None) -> int:
        return 0 if label is None else labels[label] - here - 1

    return b"".join(
        _op(op, k, offset(i, jt), offset(i, jf)) for i, (op, k, jt, jf) in enumerate(code)
    )
