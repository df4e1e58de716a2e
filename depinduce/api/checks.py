"""Checks on what a Python caller hands the API, so a wrong type is one line naming the parameter or the item,
not a TypeError from deep inside a writer or a metric — or, worse, a truthy ``"no"`` taken as True.

:func:`check_arguments` is the one boundary check: every public function's arguments against its own annotations
(and the few ranges below), called by :func:`depinduce.api.words.python_words` before the function runs."""

from __future__ import annotations

import functools
import inspect
import os
import types
import typing
from collections import abc
from collections.abc import Callable
from typing import Any, ForwardRef, Union

from depinduce.display import quote
from depinduce.errors import UsageError
from depinduce.structures.sentence import Sentence

# the lowest value of a count parameter, whichever function takes it (the commands' IntRange(min=…))
MINIMUM: dict[str, int] = {"batch_size": 1, "max_words": 1, "max_length": 1, "top": 1, "threads": 1, "jobs": 1,
                           "sentence": 1, "width": 0, "batch_tokens": 1, "iterations": 0, "channel": 0, "workers": 1}


def checked_record(item: Any, role: str, number: int) -> Sentence:
    """``item`` (a Sentence, or what carries one as ``.sentence``) when its words are strings, its heads integers
    in 0..n (one per word) and its relations strings; else a UsageError naming ``role`` and the item."""
    sentence = getattr(item, "sentence", item)
    where = f"{role}: item {number}"
    if not isinstance(sentence, Sentence):
        raise UsageError(f"{where} is a {type(item).__name__}; give a file path or depinduce sentences (e.g. what "
                         "Parser.parse yields)")
    words = sentence.words
    if not isinstance(words, list) or not all(isinstance(w, str) for w in words):
        raise UsageError(f"{where}: words must be a list of strings")
    n = len(words)
    if sentence.heads is not None:
        bad = next((h for h in sentence.heads if isinstance(h, bool) or not isinstance(h, int)), None)
        if bad is not None or not isinstance(sentence.heads, list):
            raise UsageError(f"{where}: heads must be a list of integers (0 = root), not {bad!r}")
        if len(sentence.heads) != n or any(not 0 <= h <= n for h in sentence.heads):
            raise UsageError(f"{where}: heads must be {n} integers in 0..{n}, one per word")
    if sentence.deprels is not None and (not isinstance(sentence.deprels, list) or len(sentence.deprels) != n
                                         or not all(isinstance(r, str) for r in sentence.deprels)):
        raise UsageError(f"{where}: relations (deprels) must be {n} strings, one per word")
    return sentence


def check_types(**arguments: tuple[Any, tuple[type, ...]]) -> None:
    """Each ``name=(value, allowed types)`` has one of its types (None where ``type(None)`` is allowed; a bool
    is no int here), else a UsageError naming the parameter."""
    for name, (value, allowed) in arguments.items():
        if not any(_fits(value, kind, {}) for kind in allowed):
            raise UsageError(_wrong(name, value, allowed))


def check_arguments(function: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """Every argument of a call of ``function`` fits the type its signature declares, and a count its
    :data:`MINIMUM`; else a UsageError in Python's words (``keep_punct must be a bool, not str``).  Arguments
    that do not bind are left to Python's own TypeError."""
    signature, hints = _declared(function)
    try:
        bound = signature.bind(*args, **kwargs)
    except TypeError:
        return
    for name, value in bound.arguments.items():
        hint = hints.get(name)
        kind = signature.parameters[name].kind
        if hint is None or kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
            continue
        if not _fits(value, hint, function.__globals__):
            raise UsageError(_wrong(name, value, _members(hint, function.__globals__)))
        low = MINIMUM.get(name)
        if low is not None and isinstance(value, int) and not isinstance(value, bool) and value < low:
            raise UsageError(f"{name} must be at least {low}, not {value}")


@functools.cache
def _declared(function: Callable[..., Any]) -> tuple[inspect.Signature, dict[str, Any]]:
    """The signature and each parameter's annotation, evaluated one by one (a name imported only for type
    checking stays a ForwardRef, matched by class name)."""
    signature = inspect.signature(function)
    hints: dict[str, Any] = {}
    for name, parameter in signature.parameters.items():
        if parameter.annotation is inspect.Parameter.empty:
            continue
        hints[name] = _resolve(parameter.annotation, function.__globals__)
    return signature, hints


def _resolve(annotation: Any, scope: dict[str, Any]) -> Any:
    if isinstance(annotation, ForwardRef):
        annotation = annotation.__forward_arg__
    if isinstance(annotation, str):
        try:
            return eval(annotation, scope)  # our own annotations, in their own module
        except (NameError, AttributeError, SyntaxError, TypeError):  # a name imported only for type checking
            return ForwardRef(annotation)
    return annotation


def _members(hint: Any, scope: dict[str, Any]) -> tuple[Any, ...]:
    """The alternatives of a union (flattened, names resolved), or the one type."""
    hint = _resolve(hint, scope)
    if typing.get_origin(hint) in (Union, types.UnionType):
        return tuple(m for arg in typing.get_args(hint) for m in _members(arg, scope))
    return (hint,)


_TEXT_LIKE = (str, bytes)
_COLLECTIONS = (list, tuple, set, frozenset, abc.Sequence, abc.Set)


def _fits(value: Any, hint: Any, scope: dict[str, Any]) -> bool:
    """Whether ``value`` is what ``hint`` declares: a bool is no int, a str no sequence of strings, and a
    container's items are checked when it is a list, tuple or set (an iterator is left unread)."""
    hint = _resolve(hint, scope)
    if hint is Any or isinstance(hint, typing.TypeVar):
        return True
    if isinstance(hint, ForwardRef):  # a class known here only by name
        return any(cls.__name__ == hint.__forward_arg__.split("[")[0] for cls in type(value).__mro__)
    if hint is None or hint is type(None):
        return value is None
    members = _members(hint, scope)
    if len(members) > 1:
        if isinstance(value, _TEXT_LIKE) and not any(m in (str, bytes) for m in members):
            return False  # a path or a sentence given as a str matches str, never an "iterable of …"
        return any(_fits(value, member, scope) for member in members)
    origin, args = typing.get_origin(hint) or hint, typing.get_args(hint)
    if origin is typing.Literal:
        return value in args
    if origin is bool:
        return isinstance(value, bool)
    if origin is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if origin is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if origin in (typing.TextIO, typing.IO):
        return callable(getattr(value, "write", None))
    if origin is abc.Callable:
        return callable(value)
    if not isinstance(origin, type):
        return True  # a construct this check does not know: Python's own checks remain
    if not isinstance(value, origin):
        return False
    if isinstance(value, _TEXT_LIKE) and origin not in (str, bytes, object):
        return False  # "no" is not a list of strings
    if origin is abc.Iterable:  # its items are the function's to check (it names the bad one); a dict's keys
        return not isinstance(value, abc.Mapping)  # are never what a caller meant by them
    if args and origin in _COLLECTIONS and (len(args) == 1 or args[-1] is Ellipsis):
        return all(_fits(element, args[0], scope) for element in value)
    return True


_WORDS = {bool: "a bool", int: "an int", float: "a number", str: "a str", bytes: "bytes",
          os.PathLike: "os.PathLike", type(None): "None", None: "None", abc.Callable: "a callable",
          abc.Iterable: "an iterable",
          abc.Sequence: "a sequence", list: "a list", tuple: "a tuple", dict: "a dict", abc.Mapping: "a mapping",
          typing.TextIO: "a text stream", typing.IO: "a stream"}


def _describe(hint: Any) -> str:
    if isinstance(hint, ForwardRef):
        return f"a {hint.__forward_arg__}"
    origin, args = typing.get_origin(hint) or hint, typing.get_args(hint)
    if origin is typing.Literal:
        return " or ".join(repr(a) for a in args)
    words = _WORDS.get(origin)
    if words is None:
        words = f"a {getattr(origin, '__name__', str(origin))}"
    if origin in _COLLECTIONS + (abc.Iterable,) and args and args[0] is not Any:
        inner = _members(args[0], {})
        if len(inner) <= 2:  # "a list of str", "an iterable of str or os.PathLike"; more is not read
            words += " of " + " or ".join(_describe(m).removeprefix("a ").removeprefix("an ") for m in inner)
    return words


def _wrong(name: str, value: Any, allowed: tuple[Any, ...]) -> str:
    """``name must be a bool, not str`` (Python's words), the value quoted where it is short text."""
    wanted: list[str] = []
    for kind in allowed:
        described = _describe(kind)
        if described not in wanted:
            wanted.append(described)
    if "None" in wanted:  # None last, as Python's own messages put it
        wanted = [w for w in wanted if w != "None"] + ["None"]
    listed = wanted[0] if len(wanted) == 1 else ", ".join(wanted[:-1]) + " or " + wanted[-1]
    given = "None" if value is None else type(value).__name__
    if isinstance(value, str):
        given += f" {quote(value, 40)}"
    return f"{name} must be {listed}, not {given}"
