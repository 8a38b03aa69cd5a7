"""The trusted side of the pass verdict: runs the problem's tests against a proxy.

Shipped as source (after :mod:`.literal_codec`) to a fresh ``python -I -S -B -c``, which is not
sandboxed: it runs only the problem's own text (prompt and tests, from the data set) and
values decoded from the candidate's answers. The candidate runs elsewhere, inside the
sandbox (:mod:`.sandboxed_side`); here its entry point is a proxy that sends the arguments
by value and decodes the result into exact built-in types, so the comparison in the tests
is the built-in one, and nothing the candidate controls can print, exit or return a pass.
A reply longer than :data:`REPLY_LIMIT` is refused before it is read, and a
``StopIteration`` of the candidate is raised into the tests as a ``RuntimeError`` (PEP 479),
so that it cannot end a ``map`` or ``filter`` of the tests early.

:func:`main` writes one JSON verdict line to the descriptor ``verdict_fd``:
``{"status": "passed"}``; ``{"status": "failed", "category": C, "origin": O}`` (``O``:
``"tests"`` or ``"program"``); or ``{"status": "weak"}`` when the tests cannot run this way
(an argument that is not a literal value, a name of the tests not defined by the prompt, a
prompt or test text that is not a program on its own),
and the caller falls back to running everything inside the sandbox.
"""

import builtins
import json
import os
import resource
import sys

EXCEPTIONS = frozenset(
    n for n, v in vars(builtins).items() if isinstance(v, type) and issubclass(v, BaseException)
)


# BaseException, so that a test's own ``except Exception`` around a call cannot swallow them
class ProgramExited(BaseException):
    """The candidate's process ended (exited, crashed or was killed) before the tests did."""


class NotByValue(BaseException):
    """The tests cannot call the candidate by value (see the module docstring)."""


class Unencodable(BaseException):
    """The candidate returned something outside the literal-only encoding."""


class Oversized(BaseException):
    """The candidate's reply is longer than :data:`REPLY_LIMIT` bytes."""


#: the longest reply frame decoded here: decoding takes up to ~21 bytes of memory per byte
#: of a hostile frame (a million empty lists), so a reply costs at most ~22 MiB
REPLY_LIMIT = 1 << 20


def _recv_reply(fd: int) -> object:
    """The next reply frame (None at end of file), refusing one over :data:`REPLY_LIMIT`
    before reading it."""
    try:
        return recv(fd, REPLY_LIMIT)  # noqa: F821 - from literal_codec.py, shipped first
    except ValueError:
        raise Oversized() from None


def _category(name: object) -> str:
    """A built-in exception name, or ``"Exception"``: the only names a verdict carries."""
    return name if isinstance(name, str) and name in EXCEPTIONS else "Exception"


def _from_program(e: BaseException) -> bool:
    return getattr(e, "from_program", False)


def _proxy(request_fd: int, response_fd: int):
    def candidate(*args, **kwargs):
        try:
            payload = encode((args, kwargs))  # noqa: F821 - from literal_codec.py, shipped first
        except (NotLiteral, RecursionError) as e:  # noqa: F821
            raise NotByValue(str(e)) from None
        try:
            send(request_fd, payload)  # noqa: F821
        except BrokenPipeError:
            raise ProgramExited() from None
        frame = _recv_reply(response_fd)
        if frame is None:
            raise ProgramExited()
        reply = decode(frame)  # noqa: F821 - a ValueError here: malformed, a failure
        if type(reply) is tuple and len(reply) == 2 and reply[0] == "ok":
            return reply[1]
        if type(reply) is tuple and reply[:1] == ("unencodable",):
            raise Unencodable()
        if type(reply) is tuple and len(reply) == 2 and reply[0] == "raise":
            cls = getattr(builtins, _category(reply[1]))
            if not issubclass(cls, Exception):  # SystemExit, KeyboardInterrupt, ...
                cls = Exception
            elif issubclass(cls, (StopIteration, StopAsyncIteration)):
                # PEP 479: raised into the tests as itself, it would end a map(), filter()
                # or generator the tests iterate early (``all(map(candidate, xs))`` true)
                cls = RuntimeError
            try:
                err = cls()
            except TypeError:  # e.g. UnicodeDecodeError needs arguments
                err = Exception()
            err.from_program = True
            err.program_category = _category(reply[1])
            raise err
        raise ValueError("malformed reply")

    return candidate


def _compile_prompt(prompt: str) -> object:
    """The prompt's code (a signature without a body gets ``pass``), or None."""
    for text in (prompt, prompt.rstrip() + "\n    pass\n"):
        try:
            return compile(text, "prompt.py", "exec")
        except (SyntaxError, ValueError):
            continue
    return None


def _verdict(cfg: dict) -> dict:
    rfd, wfd = cfg["response_fd"], cfg["request_fd"]
    prompt = _compile_prompt(cfg["prompt"])
    try:
        test = compile(cfg["test"], "test.py", "exec")
    except (SyntaxError, ValueError):
        test = None
    if prompt is None or test is None:  # not programs on their own (the tests end the prompt)
        return {"status": "weak"}
    try:
        hello = _recv_reply(rfd)
        hello = None if hello is None else decode(hello)  # noqa: F821
    except ValueError:
        return {"status": "failed", "category": "malformed", "origin": "program"}
    except Oversized:
        return {"status": "failed", "category": "oversized", "origin": "program"}
    if hello is None:
        return {"status": "failed", "category": "exited", "origin": "program"}
    if type(hello) is tuple and len(hello) == 2 and hello[0] == "startup":
        return {"status": "failed", "category": _category(hello[1]), "origin": "program"}
    if hello != ("ready",):
        return {"status": "failed", "category": "malformed", "origin": "program"}
    candidate = _proxy(wfd, rfd)
    ns = {"__name__": "__check__", "__builtins__": builtins}
    try:
        exec(prompt, ns)
        ns[cfg["entry_point"]] = candidate
        exec(test, ns)
        ns["check"](candidate)
    except NotByValue:
        return {"status": "weak"}
    except ProgramExited:
        return {"status": "failed", "category": "exited", "origin": "program"}
    except Unencodable:
        return {"status": "failed", "category": "unencodable", "origin": "program"}
    except Oversized:
        return {"status": "failed", "category": "oversized", "origin": "program"}
    except NameError as e:
        if _from_program(e):
            return {"status": "failed", "category": "NameError", "origin": "program"}
        return {"status": "weak"}  # a name the tests expect from the completion
    except MemoryError as e:
        origin = "program" if _from_program(e) else "tests"
        return {"status": "failed", "category": "MemoryError", "origin": origin}
    except BaseException as e:  # a failed assert, or an exception of the candidate
        if _from_program(e):
            return {"status": "failed", "category": e.program_category, "origin": "program"}
        return {"status": "failed", "category": _category(type(e).__name__), "origin": "tests"}
    return {"status": "passed"}


def main() -> None:  # pragma: no cover - runs in the trusted interpreter
    cfg = json.loads(sys.argv[1])
    for procs in cfg.get("cgroup_procs", ()):  # its own memory cgroup, before anything else
        with open(procs, "w") as f:
            f.write("0")
    mem = cfg["memory"]
    resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
    resource.setrlimit(resource.RLIMIT_CPU, (cfg["cpu"], cfg["cpu"] + 1))
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 3000))
    sys.path.extend(cfg["site_packages"])  # the tests may import what the program may
    verdict = _verdict(cfg)
    os.write(cfg["verdict_fd"], (json.dumps(verdict) + "\n").encode())
    os._exit(0)
