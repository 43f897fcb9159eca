"""``python -m evalflow side-env list|provision [NAME...]``: the side environments task code needs.

    list       each environment of the table, its pins, what triggers it, and whether its folder
               is provisioned (under $EVALFLOW_SIDE_ENVS, else ~/.cache/evalflow/side-envs)
    provision  install the named environments (default: all) now, with pip; run it once online
               before going offline (evalflow otherwise provisions on first use)

A run provisions on first use by itself; this command exists for machines that will be offline
(or for a shared folder prepared once): ``EVALFLOW_SIDE_ENVS=/shared/side-envs python -m evalflow
side-env provision``.
"""

from __future__ import annotations

from collections.abc import Sequence

from evalflow.commands.reference import print_help
from evalflow.commands.words import Command, asks_for_help, parse_words
from evalflow.errors import ConfigError, closest
from evalflow.taskspec.sidenv.envs import SIDE_ENVS, SideEnv
from evalflow.taskspec.sidenv.provision import ensure_provisioned, env_folder, is_provisioned

COMMAND = Command(
    "side-env",
    "the private package folders some task code needs (provision once online)",
    "list|provision [NAME...]",
    min_positional=1,
    note="(NAME: an environment of `side-env list`; default all)",
    doc=__doc__ or "",
)


def main(argv: Sequence[str]) -> int:
    if asks_for_help(argv):
        print_help(COMMAND)
        return 0
    words = parse_words(argv, COMMAND)
    action, names = words.positional[0], words.positional[1:]
    if action not in ("list", "provision"):
        raise ConfigError(
            f"side-env: unknown action '{action}'; {closest(action, ['list', 'provision'])} {COMMAND.line()}"
        )
    envs = _selected(names)
    for env in envs:
        if action == "provision":
            folder = ensure_provisioned(env, needed_by="`python -m evalflow side-env provision`")
            print(f"{env.name}: provisioned in {folder} ({', '.join(env.requirements)})")
        else:
            state = "provisioned" if is_provisioned(env) else "not provisioned (done on first use)"
            print(
                f"{env.name}: {', '.join(env.requirements)}; for task code importing "
                f"{', '.join(env.triggers)}; {env_folder(env)}: {state}"
            )
    return 0


def _selected(names: Sequence[str]) -> tuple[SideEnv, ...]:
    known = {env.name: env for env in SIDE_ENVS}
    for name in names:
        if name not in known:
            raise ConfigError(f"side-env: no side environment '{name}'; {closest(name, known)} {COMMAND.line()}")
    return tuple(known[n] for n in names) if names else SIDE_ENVS
