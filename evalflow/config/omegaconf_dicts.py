"""A mapping config (a composed run, a snapshot, a YAML file) as the plain ``dict[str, Any]`` the
rest of evalflow passes around.

``OmegaConf.to_container`` is typed for everything it can return (a list, a string, keys of six
types), so each caller would narrow and cast on its own; a mapping config gives a dict keyed by its
YAML's names. This says so once. OmegaConf is imported when called: importing this costs nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from omegaconf import Container


def to_dict(config: Container, *, resolve: bool) -> dict[str, Any]:
    """``OmegaConf.to_container(config, resolve=resolve)`` of a mapping config.

    ``resolve``: ``${...}`` interpolations replaced by their values (a snapshot keeps them as written).
    Raises ``TypeError`` for a list config: no caller reads one as settings.
    """
    from omegaconf import OmegaConf

    plain = OmegaConf.to_container(config, resolve=resolve)
    if not isinstance(plain, dict):
        raise TypeError(f"a mapping config was expected, got a {type(config).__name__}")
    # the stub's keys are any DictKeyType; the configs evalflow reads are keyed by YAML names
    return cast(dict[str, Any], plain)
