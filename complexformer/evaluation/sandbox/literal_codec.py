"""A literal-only encoding of Python values, and length-prefixed frames over pipes.

The trusted checker (:mod:`.trusted_side`) and the candidate program inside the sandbox
(:mod:`.sandboxed_side`) exchange arguments and results through this encoding, so what comes
back from an untrusted program is data and nothing else: :func:`decode` builds only exact
built-in ``None``, ``bool``, ``int``, ``float`` (``nan``, ``inf`` included), ``str``,
``bytes``, ``list``, ``tuple``, ``dict``, ``set`` and ``frozenset`` values. A result cannot
carry its own ``__eq__`` or ``__hash__``, run code when it is compared, or refer to anything
in the checker.

The format is JSON of tagged nodes: ``["N"]``, ``["B", 0|1]``, ``["I", hex]`` (hex has no
digit limit), ``["F", float.hex]``, ``["S", str]``, ``["Y", hex]``, and ``["L" | "T" | "E" |
"Z", [items]]``, ``["D", [[key, value], ...]]``.

This file is self-contained (standard library only, no ``from __future__``): its source is
also shipped to the sandboxed and the trusted interpreters, which run with ``-I -S``.
"""

import json
import os
import struct

MAX_DEPTH = 200
MAX_FRAME = 16 << 20


class NotLiteral(TypeError):
    """A value outside the literal-only encoding (a function, an arbitrary object)."""


def _node(x: object, convert: bool, depth: int) -> list:
    if depth > MAX_DEPTH:
        raise NotLiteral(f"nested deeper than {MAX_DEPTH} levels")
    t = type(x)
    if x is None:
        return ["N"]
    if t is bool:
        return ["B", 1 if x else 0]
    if t is int:
        return ["I", format(x, "x")]
    if t is float:
        return ["F", float.hex(x)]
    if t is str:
        return ["S", x]
    if t is bytes:
        return ["Y", x.hex()]
    if t in (list, tuple, set, frozenset):
        tag = {list: "L", tuple: "T", set: "E", frozenset: "Z"}[t]
        return [tag, [_node(v, convert, depth + 1) for v in x]]
    if t is dict:
        return [
            "D",
            [[_node(k, convert, depth + 1), _node(v, convert, depth + 1)] for k, v in x.items()],
        ]
    if convert:  # the untrusted side: subclasses and numpy scalars become their base values
        for base in (bool, int, float, str, bytes, list, tuple, dict, set, frozenset):
            if isinstance(x, base):
                return _node(base(x), False, depth)
        item = getattr(x, "item", None)
        if callable(item) and t.__module__ == "numpy":
            return _node(item(), False, depth)
    raise NotLiteral(f"a {t.__name__} is not a literal value")


def encode(x: object, convert: bool = False) -> bytes:
    """``x`` as bytes of the literal-only encoding.

    Raises:
        NotLiteral: ``x`` holds a value outside the encoding (``convert`` maps subclasses of
            the built-in types and numpy scalars to their base values first).
    """
    return json.dumps(_node(x, convert, 0), separators=(",", ":")).encode("ascii")


def _value(n: object, depth: int) -> object:
    if depth > MAX_DEPTH or type(n) is not list or not n or type(n[0]) is not str:
        raise ValueError("malformed literal")
    tag, rest = n[0], n[1:]
    if tag == "N" and not rest:
        return None
    if len(rest) != 1:
        raise ValueError("malformed literal")
    v = rest[0]
    if tag == "B" and v in (0, 1) and type(v) is int:
        return v == 1
    if type(v) is str:
        if tag == "I":
            return int(v, 16)
        if tag == "F":
            return float.fromhex(v)
        if tag == "S":
            return v
        if tag == "Y":
            return bytes.fromhex(v)
    if type(v) is list:
        if tag == "D":
            out = {}
            for kv in v:
                if type(kv) is not list or len(kv) != 2:
                    raise ValueError("malformed literal")
                out[_value(kv[0], depth + 1)] = _value(kv[1], depth + 1)
            return out
        make = {"L": list, "T": tuple, "E": set, "Z": frozenset}.get(tag)
        if make is not None:
            return make(_value(item, depth + 1) for item in v)
    raise ValueError("malformed literal")


def decode(data: bytes) -> object:
    """The value encoded by :func:`encode`, built from exact built-in types only.

    Raises:
        ValueError: ``data`` is not a well-formed encoding (an unhashable key included).
    """
    try:
        return _value(json.loads(data.decode("ascii")), 0)
    except (TypeError, UnicodeDecodeError, RecursionError) as e:
        raise ValueError(f"malformed literal ({type(e).__name__})") from None


def send(fd: int, payload: bytes) -> None:
    """Write one frame (4-byte big-endian length, then ``payload``) to descriptor ``fd``."""
    data = struct.pack(">I", len(payload)) + payload
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _read_exact(fd: int, n: int) -> bytes | None:
    parts, left = [], n
    while left:
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            return None
        parts.append(chunk)
        left -= len(chunk)
    return b"".join(parts)


def recv(fd: int, limit: int = MAX_FRAME) -> bytes | None:
    """Read one frame from ``fd``; None at end of file (the other side exited).

    Raises:
        ValueError: the frame is longer than ``limit`` bytes.
    """
    head = _read_exact(fd, 4)
    if head is None:
        return None
    (n,) = struct.unpack(">I", head)
    if n > limit:
        raise ValueError(f"frame of {n} bytes exceeds the limit of {limit}")
    return _read_exact(fd, n)
