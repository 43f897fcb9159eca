"""One name -> object registry for every extension point: scoring components, models, sandboxes.

A name is taken once. Registering a different object under a taken name is refused, since it would
silently change what every config or task naming it computes; the same object again (same module
and qualified name, as when a module is reloaded) replaces itself. Built-ins may be given as import
paths (``"pkg.module:Class"``), imported on first use, so choosing ``dummy`` never imports torch.
A miss names the closest registered names and how to add one.

Each extension room keeps its registries in a module named ``registry.py`` (``models/registry.py``,
``sandbox/registry.py``, ``scoring/registry.py``): one file name for one protocol, each an instance of
[`Registry`][evalflow.registry.Registry] and its ``register_*`` decorator; the judges' parsers live beside their parsers
(``judges/parsers.py``).

Examples:
    >>> widgets: Registry[int] = Registry("widget", error=ValueError, hint="Register yours.")
    >>> widgets.add("one", 1)
    >>> widgets.get("one"), widgets.find("two"), widgets.names()
    (1, None, ('one',))
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Generic, TypeVar

from evalflow.errors import closest

T = TypeVar("T")


def qualified(obj: Any) -> str:
    """How registered objects are told apart: the same object registered again replaces itself.

    Args:
        obj: A function or class.

    Returns:
        Its `module:qualname`.
    """
    return f"{getattr(obj, '__module__', '?')}:{getattr(obj, '__qualname__', obj)}"


class Registry(Generic[T]):
    """Names to objects: built-ins as lazy import paths, the rest as registered objects.

    Args:
        kind: What a name names, in messages (`"metric"`, `"model type"`).
        error: The error class raised: each extension point has its own, so a miss reads as a task
            error, a model error, ...
        hint: How to register one, appended to a miss.
        builtin: Built-in names to `"pkg.module:attr"` import paths, imported on first use.
        setting: The config key that holds a name (`"setting code_sandbox"`), named in a miss.
        noun: What the user calls the thing registered, in the refusal of a taken name.
        consequence: What a silent overwrite would change, in that refusal.
        check: `check(name, obj)` raises for what cannot be registered.
        identity: Tells two registrations of one object apart from two objects (default:
            [`qualified`][evalflow.registry.qualified]).
    """

    def __init__(
        self,
        kind: str,
        *,
        error: type[Exception],
        hint: str,
        builtin: Mapping[str, str] | None = None,
        setting: str = "",
        noun: str = "",
        consequence: str = "change results",
        check: Callable[[str, Any], None] | None = None,
        identity: Callable[[Any], str] = qualified,
    ) -> None:
        self.kind, self.error, self.hint, self.setting = kind, error, hint, setting
        self.noun, self.consequence, self.check, self.identity = noun or kind, consequence, check, identity
        self._paths: dict[str, str] = dict(builtin or {})
        self._objects: dict[str, T] = {}

    def register(self, name: str) -> Callable[[T], T]:
        """Decorator form of [`add`][evalflow.registry.Registry.add]: `@registry.register("name")`.

        Args:
            name: The name configs and task files will use.

        Returns:
            A decorator that registers its object and returns it unchanged.
        """

        def decorate(obj: T) -> T:
            self.add(name, obj)
            return obj

        return decorate

    def add(self, name: str, obj: T) -> None:
        """Register `obj` under `name`; the same object again (a reloaded module) replaces itself.

        Args:
            name: A non-empty string.
            obj: What the name will stand for.

        Raises:
            Exception: The registry's `error`: an empty name, a name taken by another object
                (a built-in included), or what `check` refuses.
        """
        if not isinstance(name, str) or not name:
            raise self.error(f"a {self.kind} must be registered under a non-empty string name, got {name!r}")
        if self.check is not None:
            self.check(name, obj)
        current = self._objects.get(name, self._paths.get(name))
        if current is not None and current is not obj and self._id(current) != self.identity(obj):
            raise self.error(
                f"the {self.kind} name '{name}' is already registered ({self._id(current)}); registering "
                f"{self.identity(obj)} under it would silently {self.consequence}. "
                f"Pick another name for your {self.noun}."
            )
        self._objects[name] = obj

    def get(self, name: str, *, where: str = "") -> T:
        """The object called `name`, a built-in imported now.

        Args:
            name: A registered or built-in name.
            where: The file and key the name came from, named in the error.

        Returns:
            The registered object.

        Raises:
            Exception: The registry's `error`, naming the closest registered names and how to add one.
        """
        found = self.find(name)
        if found is None:
            place = f"{where}: " if where else ""
            setting = f" ({self.setting})" if self.setting else ""
            raise self.error(
                f"{place}unknown {self.kind} {name!r}{setting}; {closest(str(name), self.names())} {self.hint}"
            )
        return found

    def find(self, name: str) -> T | None:
        """The object called `name` (a built-in path is imported now), or None.

        Args:
            name: Any value; an unhashable one (from a malformed YAML) is not found.

        Returns:
            The registered object, or None.
        """
        try:
            if name in self._objects:
                return self._objects[name]
            path = self._paths.get(name)
        except TypeError:  # an unhashable name from a malformed YAML
            return None
        if path is None:
            return None
        module, _, attr = path.partition(":")
        return getattr(importlib.import_module(module), attr)

    def names(self) -> tuple[str, ...]:
        """Every name, built-in and registered, sorted."""
        return tuple(sorted(set(self._paths) | set(self._objects)))

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and (name in self._objects or name in self._paths)

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self.names())

    def _id(self, current: Any) -> str:
        return current if isinstance(current, str) else self.identity(current)
