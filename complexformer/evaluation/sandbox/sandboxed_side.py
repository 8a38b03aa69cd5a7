"""The sandboxed interpreter's side of :mod:`.runner`: limits, the Python guard, the program.

Shipped as source to a fresh ``python -I -S -B -c`` (after the source of :mod:`.literal_codec`),
so it is self-contained: standard library only, no ``from __future__``, nothing of
``complexformer`` imported. :func:`main` reads its settings from ``sys.argv[1]`` (JSON).

With ``report`` (the weak path of :mod:`.verdict`), the child reads a token from the
descriptor ``token_fd`` until end of file before the program runs, closes it, and writes the
token to ``report_fd`` only when the program (prompt, completion, tests, ``check``) ran to its
end without an exception: the token is in no file, argument or variable the program can read
by ordinary means, only in this interpreter's memory.

In ``serve`` mode (the trusted verdict of :mod:`.verdict`) the program (prompt + completion,
no tests) runs as ``__main__``; then the child answers calls of the entry point, reading
``(args, kwargs)`` frames from the request descriptor and writing ``("ok", result)``,
``("raise", exception type name)`` or ``("unencodable",)`` frames to the response
descriptor, in the literal-only encoding of :mod:`.literal_codec`. Nothing of the tests, and no
pass token, is ever in this process.
"""

import json
import os
import sys

#: Audit events the guard refuses outright.
_FORBIDDEN = frozenset(
    (
        "os.system",
        "os.exec",
        "os.posix_spawn",
        "os.spawn",
        "os.fork",
        "os.forkpty",
        "os.kill",
        "os.killpg",
        "subprocess.Popen",
        "pty.spawn",
        "os.startfile",
        "socket.__new__",
        "socket.bind",
        "socket.connect",
        "socket.getaddrinfo",
        "socket.gethostbyname",
        "socket.gethostbyaddr",
        "socket.getnameinfo",
        "socket.sendto",
        "socket.sendmsg",
        "socket.sethostname",
        "ctypes.dlsym",
        "ctypes.dlsym/handle",
        "ctypes.cdata",
        "ctypes.cdata/buffer",
        "ctypes.call_function",
        "ctypes.string_at",
        "ctypes.wstring_at",
        "resource.setrlimit",
        "resource.prlimit",
        "gc.get_objects",
        "gc.get_referrers",
        "gc.get_referents",
    )
)
#: Audit events whose path arguments must lie inside the working directory:
#: event -> ((index of a path argument, index of its dir_fd argument or None), ...).
_CHECKED = {
    "os.remove": ((0, 1),),
    "os.rmdir": ((0, 1),),
    "os.mkdir": ((0, 2),),
    "os.chmod": ((0, 2),),
    "os.chown": ((0, 3),),
    "os.utime": ((0, 3),),
    "os.truncate": ((0, None),),
    "os.chflags": ((0, None),),
    "os.lchflags": ((0, None),),
    "os.setxattr": ((0, None),),
    "os.removexattr": ((0, None),),
    "os.rename": ((0, 2), (1, 3)),
    "os.link": ((0, 2), (1, 3)),
    "os.symlink": ((1, 2),),
    "shutil.rmtree": ((0, 1),),
    "shutil.chown": ((0, None),),
    "shutil.copyfile": ((1, None),),
    "shutil.copymode": ((1, None),),
    "shutil.copystat": ((1, None),),
    "shutil.move": ((0, None), (1, None)),
}


def _setup(cfg: dict) -> tuple[str, dict | None, bytes]:  # pragma: no cover - sandboxed
    """Join the cgroups, set the resource limits, enter the working directory and read the
    program and the weak path's token; a failure ends the process with ``setup_exit``.

    Returns:
        ``(source, report, token)``.
    """
    import resource

    try:
        for procs in cfg["cgroup_procs"]:
            with open(procs, "w") as f:
                f.write("0")
        inf = resource.RLIM_INFINITY
        limits = [
            ("RLIMIT_CORE", 0, 0),
            ("RLIMIT_AS", cfg["memory"], cfg["memory"]),
            ("RLIMIT_CPU", cfg["cpu"], cfg["cpu"] + 1),
            ("RLIMIT_FSIZE", cfg["fsize"], cfg["fsize"]),
            ("RLIMIT_NOFILE", cfg["nofile"], cfg["nofile"]),
            ("RLIMIT_NPROC", cfg["nproc"], cfg["nproc"]),
        ]
        for name, soft, hard in limits:
            if soft is None or not hasattr(resource, name):
                continue
            res = getattr(resource, name)
            _, cur_hard = resource.getrlimit(res)
            if cur_hard != inf:
                soft, hard = min(soft, cur_hard), min(hard, cur_hard)
            resource.setrlimit(res, (soft, hard))
        os.chdir(cfg["work"])
        with open(cfg["program"], encoding="utf-8") as f:
            source = f.read()
        report = cfg.get("report")
        token = b""
        if report:  # the weak path's token: only in this process's memory from here on
            while len(token) < 4096:
                chunk = os.read(report["token_fd"], 4096)
                if not chunk:
                    break
                token += chunk
            os.close(report["token_fd"])
    except Exception as e:  # report, do not run the program unconstrained
        sys.stderr.write(f"sandbox setup failed: {type(e).__name__}: {e}\n")
        sys.stderr.flush()
        os._exit(cfg["setup_exit"])
    return source, report, token


def _install_guard(work: str) -> None:  # pragma: no cover - runs in the sandbox
    """The audit hook and the replaced functions that keep writes inside ``work`` and refuse
    processes, sockets, signals, ctypes calls, rlimit changes and the gc's object walks."""
    import errno

    work = os.path.realpath(work)
    prefix = work + os.sep
    write_flags = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
    devices = {"/dev/null"}
    forbidden, checked = _FORBIDDEN, _CHECKED
    realpath, isabs, join, fsdecode = (
        os.path.realpath,
        os.path.isabs,
        os.path.join,
        os.fsdecode,
    )

    def denied(what: str, path: object = None) -> PermissionError:
        msg = f"sandbox: {what} is not allowed"
        return (
            PermissionError(errno.EACCES, msg)
            if path is None
            else PermissionError(errno.EACCES, msg, path)
        )

    def inside(path: object, dir_fd: object) -> bool:
        if isinstance(path, int):  # an open descriptor: checked when it was opened
            return True
        try:
            p = fsdecode(path)
            if p in devices:
                return True
            if not isabs(p):
                if isinstance(dir_fd, int) and dir_fd >= 0:
                    base = os.readlink(f"/proc/self/fd/{dir_fd}")
                else:
                    base = os.getcwd()
                p = join(base, p)
            real = realpath(p)
        except Exception:
            return False
        return real == work or real.startswith(prefix)

    def hook(event: str, args: tuple) -> None:
        if event == "open":
            path, mode, flags = (tuple(args) + (None, None, None))[:3]
            writing = (isinstance(flags, int) and flags & write_flags) or (
                isinstance(mode, str) and any(c in mode for c in "wax+")
            )
            if writing and not inside(path, None):
                raise denied("writing outside the working directory", path)
            return
        if event in forbidden or (event == "ctypes.dlopen" and args[0] is not None):
            raise denied(event)  # dlopen(None) lets ``import ctypes`` (numpy) work
        spec = checked.get(event)
        if spec is not None:
            for pi, fi in spec:
                if pi < len(args):
                    fd = args[fi] if fi is not None and fi < len(args) else None
                    if not inside(args[pi], fd):
                        raise denied(f"{event} outside the working directory", args[pi])

    sys.addaudithook(hook)
    os_open = os.open

    def guarded_open(
        path: object, flags: int, mode: int = 0o777, *, dir_fd: int | None = None
    ) -> int:
        # the "open" audit event omits dir_fd: resolve it here
        if dir_fd is not None and flags & write_flags and not inside(path, dir_fd):
            raise denied("writing outside the working directory", path)
        return os_open(path, flags, mode, dir_fd=dir_fd)

    os.open = guarded_open

    def blocked(*_args: object, **_kwargs: object) -> None:
        raise denied("this operation")

    import _posixsubprocess

    _posixsubprocess.fork_exec = blocked
    for name in ("setsid", "setpgid", "setpgrp", "mknod", "chroot", "unshare", "setns"):
        if hasattr(os, name):
            setattr(os, name, blocked)


def main() -> None:  # pragma: no cover - runs in the sandboxed interpreter
    """Set the resource limits, enter the working directory, install the guard, run the
    program as ``__main__``, then (``serve`` mode) answer calls of its entry point."""
    cfg = json.loads(sys.argv[1])
    source, report, token = _setup(cfg)
    sys.dont_write_bytecode = True
    sys.path.extend(cfg["site_packages"])  # without .pth processing (-S): fast, no hooks
    import _sitebuiltins
    import builtins

    builtins.exit = _sitebuiltins.Quitter("exit", "Ctrl-D (i.e. EOF)")
    builtins.quit = _sitebuiltins.Quitter("quit", "Ctrl-D (i.e. EOF)")
    builtins.help = _sitebuiltins._Helper()

    if cfg["guard"]:
        _install_guard(cfg["work"])

    import linecache
    import types

    filename = "program.py"
    main = types.ModuleType("__main__")
    main.__dict__["__file__"] = os.path.join(cfg["work"], filename)
    sys.modules["__main__"] = main
    sys.argv = [filename]
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    memory_exit = cfg["memory_exit"]
    serve = cfg.get("serve")
    del cfg
    try:
        if serve is None:
            exec(compile(source, filename, "exec"), main.__dict__)
            if report:  # the whole program ran to its end (its tests included)
                os.write(report["report_fd"], token)
            return
        try:
            exec(compile(source, filename, "exec"), main.__dict__)
        except MemoryError:
            raise
        except SystemExit:
            _exit_now(0)
        except BaseException as e:
            _report(e)
            _reply(serve["response_fd"], ("startup", type(e).__name__))
            _exit_now(1)
        _serve(main.__dict__.get(serve["entry_point"]), serve)
    except MemoryError:
        try:
            sys.stderr.write("\nMemoryError: the sandbox's memory limit was reached\n")
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(memory_exit)


def _exit_now(code: int) -> None:  # pragma: no cover - sandboxed
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(code)


def _report(e: BaseException) -> None:  # pragma: no cover - sandboxed
    """The exception's traceback on stderr, as the interpreter would print it."""
    import traceback

    try:
        traceback.print_exception(e)
        sys.stderr.flush()
    except BaseException:
        pass


def _reply(fd: int, message: tuple) -> None:  # pragma: no cover - sandboxed
    try:
        payload = encode(message, convert=True)  # noqa: F821 - from literal_codec.py, shipped first
    except (NotLiteral, RecursionError, ValueError):  # noqa: F821
        payload = encode(("unencodable",))  # noqa: F821
    send(fd, payload)  # noqa: F821


def _serve(fn: object, serve: dict) -> None:  # pragma: no cover - sandboxed
    """Answer ``(args, kwargs)`` requests with the entry point's results until end of file."""
    rfd, wfd = serve["request_fd"], serve["response_fd"]
    if not callable(fn):
        sys.stderr.write(f"NameError: name {serve['entry_point']!r} is not defined\n")
        _reply(wfd, ("startup", "NameError"))
        _exit_now(1)
    _reply(wfd, ("ready",))
    while True:
        frame = recv(rfd)  # noqa: F821
        if frame is None:
            _exit_now(0)
        args, kwargs = decode(frame)  # noqa: F821
        try:
            result = fn(*args, **kwargs)
        except SystemExit:
            _exit_now(0)
        except MemoryError:
            raise
        except BaseException as e:
            _report(e)
            _reply(wfd, ("raise", type(e).__name__))
            continue
        _reply(wfd, ("ok", result))
