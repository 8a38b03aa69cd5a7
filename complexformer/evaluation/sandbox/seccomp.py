"""The sandbox's seccomp filter: sockets of the Unix family only, no ``io_uring``.

A network namespace alone does not keep a program off the network stack: bubblewrap brings
the new namespace's loopback up, and socket buffers are charged to no memory cgroup on
cgroup v1 (on v2 only TCP's), so a program binding UDP sockets to 127.0.0.1 and filling their
receive queues takes host memory that its budget never sees (the host's ``udp_mem`` and
``tcp_mem``, gigabytes). This filter makes ``socket(2)`` fail with ``EAFNOSUPPORT`` for every
family but ``AF_UNIX`` (``socketpair``, ``asyncio``'s self-pipe and ``multiprocessing`` still
work), and ``io_uring_setup(2)`` with ``ENOSYS`` (an ``IORING_OP_SOCKET`` request would create
a socket without the ``socket`` system call). System calls of another ABI than the
interpreter's (``int 0x80`` on x86-64, the x32 ABI) fail with ``ENOSYS``: the filter checks
numbers of one ABI only.

The program is classic BPF over ``struct seccomp_data`` (``nr`` at offset 0, ``arch`` at 4,
``args[0]`` at 16; the low 32 bits on a little-endian machine, all that ``socket``'s ``int``
family reads), as in the kernel's "Seccomp BPF" documentation
(``Documentation/userspace-api/seccomp_filter.rst``). bubblewrap loads it (``--seccomp FD``)
with ``no_new_privs``, after its own set-up; it holds for every process of the sandbox, and a
filter cannot be removed, only added to. :func:`socket_filter` returns None where the machine's
ABI is not one of :data:`ABIS` (the sandbox then runs without it, and says so).
"""

from __future__ import annotations

import errno
import platform
import struct
import sys

__all__ = ["ABIS", "socket_filter"]

AF_UNIX = 1
_RET_ALLOW = 0x7FFF0000
_RET_ERRNO = 0x00050000
_LD_W_ABS = 0x20  # BPF_LD | BPF_W | BPF_ABS
_JEQ_K = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
_JGE_K = 0x35  # BPF_JMP | BPF_JGE | BPF_K
_RET_K = 0x06  # BPF_RET | BPF_K
_X32_BIT = 0x40000000

#: machine -> (AUDIT_ARCH_*, __NR_socket, __NR_io_uring_setup, whether the x32 ABI exists)
ABIS = {
    "x86_64": (0xC000003E, 41, 425, True),
    "aarch64": (0xC00000B7, 198, 425, False),
}


def _ins(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)  # struct sock_filter


def socket_filter(machine: str | None = None) -> bytes | None:
    """The filter program (``struct sock_filter`` records, as ``bwrap --seccomp`` reads them)
    for ``machine`` (default: this one), or None for a machine outside :data:`ABIS` or an
    interpreter that is not 64-bit little-endian."""
    machine = machine or platform.machine()
    if machine not in ABIS or sys.byteorder != "little" or struct.calcsize("P") != 8:
        return None
    arch, nr_socket, nr_io_uring, x32 = ABIS[machine]
    enosys = _ins(_RET_K, _RET_ERRNO | errno.ENOSYS)
    prog = [
        _ins(_LD_W_ABS, 4),  # A = arch
        _ins(_JEQ_K, arch, 1, 0),
        enosys,  # another ABI's system call numbers
        _ins(_LD_W_ABS, 0),  # A = nr
    ]
    if x32:
        prog += [_ins(_JGE_K, _X32_BIT, 0, 1), enosys]
    prog += [
        _ins(_JEQ_K, nr_io_uring, 0, 1),
        enosys,
        _ins(_JEQ_K, nr_socket, 1, 0),
        _ins(_RET_K, _RET_ALLOW),  # any other system call
        _ins(_LD_W_ABS, 16),  # A = family (low 32 bits of args[0])
        _ins(_JEQ_K, AF_UNIX, 0, 1),
        _ins(_RET_K, _RET_ALLOW),
        _ins(_RET_K, _RET_ERRNO | errno.EAFNOSUPPORT),
    ]
    return b"".join(prog)
