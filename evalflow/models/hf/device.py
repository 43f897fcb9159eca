"""``model.device``: where a local model runs, resolved once from what was asked and what torch sees.

- ``auto`` (every local preset's default): CUDA where torch sees it (``cuda``, the device name
  lm-eval's ``HFLM`` uses), else Apple's MPS, else the CPU. A user with a GPU gets it without
  knowing the setting exists; a CPU machine runs as before.
- ``cpu``, ``cuda``, ``cuda:N``, ``mps``: that device when it is here. When it is not (``cuda:0``
  on a machine without CUDA, ``cuda:3`` with two GPUs, ``mps`` off a Mac), lm-eval 0.4.13's
  fallback (``HFLM.__init__``: a device outside its list of present ones becomes ``cuda`` if torch
  sees CUDA, else ``cpu``) with one warning line, not a refusal: a config written for a GPU
  machine still runs elsewhere, and says it runs slower.
- ``npu:N``, ``xpu:N``, ``hpu:N`` (Ascend, Intel and Gaudi accelerators, in lm-eval's list too):
  that device when torch's backend for it reports it, else the same fallback.
- anything else (``gpu``, ``cuda0``) is refused before the model loads: lm-eval would fall back
  silently, which hides a typo.

:func:`resolve` is the rule, a pure function of the asked name and what torch reports
(:class:`Seen`); :func:`choose` is the edge that asks torch. The device is in no cache key (the
same weights give the same answers up to float noise wherever they run, ``HFModel.identity``),
so this module is outside the HF semantics' code hash.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass

from evalflow.errors import ConfigError

log = logging.getLogger(__name__)

NAMES = "auto, cpu, cuda, cuda:N, mps, npu:N, xpu:N, hpu:N"
OTHER_ACCELERATORS = ("npu", "xpu", "hpu")  # torch.<kind>.device_count(), where the backend is installed
_NAME = re.compile(r"(cpu|cuda|mps|npu|xpu|hpu)(?::(\d+))?")


@dataclass(frozen=True)
class Seen:
    """What torch reports about this machine: how many CUDA devices it may use (0: none, or no
    CUDA build) and whether Apple's MPS backend is available."""

    cuda: int
    mps: bool
    others: tuple[tuple[str, int], ...] = ()  # (kind, device count) of OTHER_ACCELERATORS torch sees


@dataclass(frozen=True)
class Device:
    """``model.device`` as asked, the torch device name used, and the warning of a fallback."""

    asked: str
    used: str
    warning: str | None = None


def parse_device(asked: object) -> tuple[str, int | None]:
    """``(kind, index)`` of a ``model.device`` value (``("auto", None)``, ``("cuda", 1)``), refused
    when it names no device. Needs no torch, so the model's identity checks it too: a bad name is
    refused in a run served from the cache, which never loads the model."""
    name = str(asked).strip().lower()
    if name == "auto":
        return name, None
    match = _NAME.fullmatch(name)
    if match is None:
        raise ConfigError(
            f"model.device {asked!r} is not a device name; use one of {NAMES} (auto: CUDA where torch sees "
            "it, else Apple's MPS, else the CPU), e.g. model.device=auto."
        )
    return match[1], None if match[2] is None else int(match[2])


def resolve(asked: object, seen: Seen) -> Device:
    """The device ``asked`` resolves to on a machine where torch reports ``seen``.

    >>> resolve("auto", Seen(cuda=2, mps=False)).used
    'cuda'
    >>> resolve("cuda:0", Seen(cuda=0, mps=False)).used
    'cpu'
    """
    kind, index = parse_device(asked)
    if kind == "auto":
        return Device(str(asked), "cuda" if seen.cuda else "mps" if seen.mps else "cpu")
    missing = _missing(kind, index, seen)
    if missing is None:
        return Device(str(asked), str(asked).strip().lower())
    fallback = "cuda" if seen.cuda else "cpu"
    return Device(
        str(asked),
        fallback,
        f"model.device={asked} but {missing}; running on {fallback} instead "
        "(lm-eval's fallback). Set model.device=auto to pick the best device here.",
    )


def _missing(kind: str, index: int | None, seen: Seen) -> str | None:
    """Why device ``kind[:index]`` is not on this machine, or None when it is."""
    if kind == "cuda" and not seen.cuda:
        return "torch sees no CUDA device here"
    if kind == "cuda" and index is not None and index >= seen.cuda:
        return f"torch sees {seen.cuda} CUDA device{'s' if seen.cuda > 1 else ''} (cuda:0 to cuda:{seen.cuda - 1})"
    if kind == "mps" and not seen.mps:
        return "torch sees no MPS device here (Apple silicon, with a torch built for it)"
    if kind == "mps" and index not in (None, 0):
        return "MPS has one device, mps:0"
    if kind in OTHER_ACCELERATORS:
        count = dict(seen.others).get(kind, 0)
        if count == 0 or (index or 0) >= count:
            return f"torch sees {count} {kind} device{'' if count == 1 else 's'} here"
    return None


def seen() -> Seen:
    """What this machine's torch reports (imports torch)."""
    import torch

    mps = getattr(torch.backends, "mps", None)
    counts = ((kind, _count(getattr(torch, kind, None))) for kind in OTHER_ACCELERATORS)
    others = tuple((kind, count) for kind, count in counts if count)
    return Seen(
        cuda=torch.cuda.device_count() if torch.cuda.is_available() else 0,
        mps=bool(mps is not None and mps.is_available()),
        others=others,
    )


def _count(backend: object) -> int:
    """Devices of a torch backend module (``torch.xpu``), 0 where it is absent or reports none."""
    available, count = getattr(backend, "is_available", None), getattr(backend, "device_count", None)
    return int(count()) if available is not None and count is not None and available() else 0


def choose(asked: object, who: str) -> Device:
    """``model.device`` resolved on this machine; a fallback's warning logged, naming ``who``."""
    device = resolve(asked, seen())
    if device.warning:
        log.warning("%s: %s", who, device.warning)
    return device
