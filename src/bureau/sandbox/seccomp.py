"""A seccomp filter that stops sandboxed code from creating user namespaces.

Without it, an agent can `unshare -Ur` into a user namespace of its own, become "root" there and
mount a tmpfs sized at half the machine's RAM, which no storage limit of ours sees (RLIMIT_FSIZE
caps only each file). New user namespaces are also where much of the kernel's attack surface
lies, which is why container runtimes filter them too. The filter:

- fails `unshare` and `clone` with EPERM when their flags ask for CLONE_NEWUSER;
- answers `clone3` with ENOSYS, as Docker's default profile does: its flags sit in memory that
  a filter cannot read, and the C library then falls back to `clone`;
- fails every call made through another ABI (i386 or x32 on x86-64), which would otherwise
  reach the same calls by other numbers; 32-bit programs therefore do not run.

It is a classic BPF program (no libseccomp needed), handed to bwrap with `--seccomp FD`. On an
architecture it does not know, `program()` returns None and sandboxes run without it.
"""

from __future__ import annotations

import errno
import platform
import struct

_LD_ABS, _JEQ, _JGE, _JSET, _RET = 0x20, 0x15, 0x35, 0x45, 0x06
_ALLOW = 0x7FFF0000
_ERRNO = 0x00050000
_CLONE_NEWUSER = 0x10000000
_X32_BIT = 0x40000000
# seccomp_data: nr at 0, arch at 4, args[0] at 16 (its low 32 bits on little-endian).
_NR, _ARCH, _ARG0 = 0, 4, 16

# machine: (AUDIT_ARCH, unshare, clone, clone3)
_ARCHES = {
    "x86_64": (0xC000003E, 272, 56, 435),
    "aarch64": (0xC00000B7, 97, 220, 435),
}


def _op(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def program(machine: str | None = None) -> bytes | None:
    """The filter for this machine's architecture, as bwrap reads it from its fd."""
    known = _ARCHES.get(machine or platform.machine())
    if known is None:
        return None
    arch, unshare, clone, clone3 = known
    x32 = _X32_BIT if arch == _ARCHES["x86_64"][0] else 0xFFFFFFFF
    # A jump skips that many instructions after itself. Labels: 7 allow, 8 check the flags,
    # 10 allow, 11 and 12 EPERM, 13 ENOSYS.
    ops = [
        _op(_LD_ABS, _ARCH),  # 0
        _op(_JEQ, arch, 0, 10),  # 1: a foreign ABI (i386 on x86-64) -> EPERM (12)
        _op(_LD_ABS, _NR),  # 2
        _op(_JGE, x32, 8, 0),  # 3: the x32 ABI -> EPERM (12)
        _op(_JEQ, clone3, 8, 0),  # 4: -> ENOSYS (13)
        _op(_JEQ, unshare, 2, 0),  # 5: -> check the flags (8)
        _op(_JEQ, clone, 1, 0),  # 6: -> check the flags (8)
        _op(_RET, _ALLOW),  # 7
        _op(_LD_ABS, _ARG0),  # 8
        _op(_JSET, _CLONE_NEWUSER, 1, 0),  # 9: -> EPERM (11)
        _op(_RET, _ALLOW),  # 10
        _op(_RET, _ERRNO | errno.EPERM),  # 11
        _op(_RET, _ERRNO | errno.EPERM),  # 12
        _op(_RET, _ERRNO | errno.ENOSYS),  # 13
    ]
    return b"".join(ops)
