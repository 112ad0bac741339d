"""Grading integrity: the checks trust nothing that notebook code can change after import.

Three mechanisms, all used by every check (this module holds the first and the third;
:mod:`.forbid` the second; :mod:`.grading_hooks` what changes under ``tlab grade``):

1. **Snapshot.** When ``transformer_lab.checks`` is imported (the grader imports it before
   any student cell runs), it records every public function of torch, ``torch.Tensor``,
   ``torch.nn.functional``, ``torch.testing``, numpy, ``numpy.testing``, the package's
   reference modules (with their code objects) and the checks themselves. Each check first
   calls :func:`verify`, which names anything replaced since, e.g. ``torch.allclose``.
2. **References disabled.** :func:`forbid` runs the student's function while the reference
   for the graded thing cannot be used: the reference's ``__code__`` is swapped for one that
   raises (so any alias, ``from transformer_lab.attention import softmax as sm``, is caught),
   and a profile hook records any call into the reference's code or into PyTorch's built-in
   equivalent (so a copied function object is caught too).
3. **Sealed module.** The checks modules refuse attribute assignment, and their public
   functions are served from a registry, so ``checks.check_softmax = lambda f: None`` fails.

This is defence against ordinary monkeypatching, not a sandbox: student code runs with the
grader's rights (see docs/instructor_guide.md).
"""

from __future__ import annotations

import os
import sys
import types
from collections.abc import Iterator
from typing import Any, NamedTuple

import numpy as np
import numpy.testing  # noqa: F401  (snapshotted below)
import torch
import torch.nn.functional as F
import torch.testing  # noqa: F401

__all__ = ["verify", "seal", "take_snapshot", "tampered", "TRUSTED"]


_MISSING = object()


class _Trusted(NamedTuple):
    """The functions the checks compare with (a tuple: notebook code cannot reassign them)."""

    allclose: Any
    isfinite: Any
    isnan: Any
    equal: Any
    is_tensor: Any
    getprofile: Any
    setprofile: Any


# Trusted copies of what the checks use to compare, taken at import (immutable).
TRUSTED = _Trusted(
    allclose=torch.allclose,
    isfinite=torch.isfinite,
    isnan=torch.isnan,
    equal=torch.equal,
    is_tensor=torch.is_tensor,
    getprofile=sys.getprofile,
    setprofile=sys.setprofile,
)


def _watched() -> list[tuple[str, object]]:
    import transformer_lab._validate as v
    import transformer_lab.attention as a
    import transformer_lab.blocks as b
    import transformer_lab.bpe as bp
    import transformer_lab.heads as h
    import transformer_lab.masks as m
    import transformer_lab.positional as p

    return [
        ("torch", torch),
        ("torch.nn.functional", F),
        ("torch.testing", torch.testing),
        ("numpy", np),
        ("numpy.testing", np.testing),
        ("transformer_lab.attention", a),
        ("transformer_lab.heads", h),
        ("transformer_lab.masks", m),
        ("transformer_lab.positional", p),
        ("transformer_lab.blocks", b),
        ("transformer_lab._validate", v),
        ("transformer_lab.bpe", bp),
    ]


def _entries(label: str, owner: object) -> Iterator[tuple[str, object, str, object, object]]:
    """(label, owner, attribute, object, code or None) for the callables worth watching."""
    is_class = isinstance(owner, type)
    package_module = label.startswith("transformer_lab")
    for name, obj in list(vars(owner).items()):
        if name.startswith("__") and not is_class:
            continue
        if isinstance(obj, types.ModuleType) or not (
            callable(obj) or isinstance(obj, (staticmethod, classmethod))
        ):
            continue
        yield label, owner, name, obj, getattr(obj, "__code__", None)
        # Methods of the package's own classes (e.g. MultiHeadAttention.forward).
        if (
            package_module
            and isinstance(obj, type)
            and obj.__module__ == getattr(owner, "__name__", None)
        ):
            for mname, meth in vars(obj).items():
                code = getattr(meth, "__code__", None)
                if code is not None:
                    yield f"{label}.{name}", obj, mname, meth, code


# owner id -> (label, owner, {attribute: (object, code)})
_SNAPSHOT: dict[int, tuple[str, object, dict[str, tuple[object, object]]]] = {}


_SEALED: dict[str, dict[str, object]] = {}  # module name -> public registry


# Classes whose every attribute (own or inherited, e.g. Tensor.__eq__ from TensorBase) is watched.
_CLASSES: list[tuple[str, type]] = [("torch.Tensor", torch.Tensor)]


_CLASS_SNAPSHOT: dict[str, dict[str, object]] = {}


def _static_lookup(cls: type, name: str) -> object:
    """What ``cls.name`` resolves to, without triggering descriptors (binding makes new objects)."""
    for klass in cls.__mro__:
        namespace = vars(klass)
        if name in namespace:
            return namespace[name]
    return _MISSING


def take_snapshot() -> None:
    """Record the watched callables (called once, at import of transformer_lab.checks)."""
    for label, owner in _watched():
        for sublabel, obj_owner, attr, obj, code in _entries(label, owner):
            entry = _SNAPSHOT.setdefault(id(obj_owner), (sublabel, obj_owner, {}))
            entry[2][attr] = (obj, code)
    for label, cls in _CLASSES:
        _CLASS_SNAPSHOT[label] = {name: _static_lookup(cls, name) for name in dir(cls)}


_TORCH_DIR = os.path.dirname(torch.__file__)


def _torch_rewrap(current: object, original: object) -> bool:
    """True if PyTorch itself wrapped ``original`` (``torch._dynamo`` re-wraps ``torch.manual_seed``
    when anything imports it: ``torch.compile``, the FLOP counter, ``transformers``)."""
    code = getattr(current, "__code__", None)
    return (
        getattr(current, "__wrapped__", None) is original
        and code is not None
        and os.path.abspath(code.co_filename).startswith(_TORCH_DIR + os.sep)
    )


def tampered() -> list[str]:
    """Names of watched callables that were replaced, deleted or had their code swapped."""
    bad = []
    for label, owner, attrs in _SNAPSHOT.values():
        namespace = vars(owner)
        for attr, (obj, code) in attrs.items():
            current = namespace.get(attr, _MISSING)
            if _torch_rewrap(current, obj):
                current = obj  # PyTorch's own wrapper around the recorded function: check that one
            if current is not obj:
                bad.append(f"{label}.{attr}")
            elif code is not None and getattr(current, "__code__", None) is not code:
                bad.append(f"{label}.{attr}.__code__")
    for label, cls in _CLASSES:
        for name, obj in _CLASS_SNAPSHOT[label].items():
            if _static_lookup(cls, name) is not obj:
                bad.append(f"{label}.{name}")
    for modname, namespace_then in _SEALED_NAMESPACES.items():
        module = sys.modules.get(modname)
        if module is None:
            bad.append(modname)
            continue
        namespace = object.__getattribute__(module, "__dict__")
        for name, obj in namespace_then.items():
            if namespace.get(name, _MISSING) is not obj:
                bad.append(f"{modname}.{name}")
            elif (modname, name) in _SEALED_CODES and obj.__code__ is not _SEALED_CODES[
                (modname, name)
            ]:
                bad.append(f"{modname}.{name}.__code__")
    return bad


_SEALED_CODES: dict[tuple[str, str], object] = {}


_SEALED_NAMESPACES: dict[str, dict[str, object]] = {}


def verify(check_name: str) -> None:
    """Raise AssertionError naming every watched function that notebook code replaced."""
    __tracebackhide__ = True  # IPython hides this frame: students see their cell and the message
    bad = tampered()
    if bad:
        shown = ", ".join(f"`{b}`" for b in bad[:5]) + (
            f" and {len(bad) - 5} more" if len(bad) > 5 else ""
        )
        raise AssertionError(
            f"{check_name}: grading integrity: {shown} changed after transformer_lab.checks was imported. "
            f"The checks refuse to run with replaced comparison or reference functions; remove the code "
            f"that patches them and restart the kernel."
        )


class _SealedModule(types.ModuleType):
    """A module whose public checks cannot be replaced from notebook code."""

    def __getattribute__(self, name: str):
        registry = _SEALED.get(object.__getattribute__(self, "__name__"))
        if registry is not None and name in registry:
            return registry[name]
        return super().__getattribute__(name)

    def __setattr__(self, name: str, value) -> None:
        registry = _SEALED.get(object.__getattribute__(self, "__name__"))
        if registry is not None and (
            name in registry or (not name.startswith("__") and name in self.__dict__)
        ):
            raise AttributeError(
                f"{self.__name__} is read-only: notebook code cannot replace {name!r} "
                f"(the graded tests always use the original checks)."
            )
        super().__setattr__(name, value)

    def __delattr__(self, name: str) -> None:
        registry = _SEALED.get(object.__getattribute__(self, "__name__"))
        if registry is not None and (name in registry or not name.startswith("__")):
            raise AttributeError(
                f"{self.__name__} is read-only: notebook code cannot delete {name!r}."
            )
        super().__delattr__(name)


def seal(module_name: str) -> None:
    """Make ``module_name`` read-only and serve its public callables from a private registry."""
    module = sys.modules[module_name]
    registry = {
        name: obj
        for name, obj in vars(module).items()
        if not name.startswith("_") and (callable(obj) or isinstance(obj, types.ModuleType))
    }
    _SEALED[module_name] = registry
    _SEALED_NAMESPACES[module_name] = {
        k: v for k, v in vars(module).items() if not k.startswith("__")
    }
    for name, obj in _SEALED_NAMESPACES[module_name].items():
        code = getattr(obj, "__code__", None)
        if code is not None and getattr(obj, "__module__", None) == module_name:
            _SEALED_CODES[(module_name, name)] = code
    module.__class__ = _SealedModule
