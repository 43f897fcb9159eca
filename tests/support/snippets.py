"""The documentation's fenced blocks: which shell blocks run, what the others need, and running them.

Every shell block (```` ```bash ````, ``sh``, ``shell``, ``console``) of README.md and docs/*.md
sits right below one marker line (docs/contributing.md, "The documentation"):

- ``<!-- runnable -->``: its lines run, in order, in one temporary folder per page, in the fast tier;
- ``<!-- runnable: slow -->``: the same in the slow tier, where a line may run the real SmolLM2 model;
- ``<!-- needs: WHAT[, WHAT] -->``: not run; each WHAT is a word of :data:`NEEDS` saying why.

A fenced block with a title, ```` ```yaml title="word_tasks/capitals.yaml" ```` (the title shows
above the block on the site), is written to that path in the page's folder before its lines run:
a page's task YAML, its data, its model class.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SHELL_LANGS = ("bash", "sh", "shell", "console")
NEEDS = {
    "gpu": "a CUDA GPU",
    "server": "a running server: a model behind an OpenAI-compatible API, an MLflow server",
    "account": "an account or API key (Weights & Biases, a hosted API)",
    "cluster": "a Ray cluster or Slurm",
    "hub": "the Hugging Face hub: datasets or weights downloaded",
    "shared": "the benchmark data of ../shared (data_map=shared)",
    "model": "a real model's weights and minutes of compute",
    "extra": "an optional dependency group: pip install 'evalflow[NAME]'",
    "install": "installs packages",
    "placeholder": "names to fill in: PATH, HOST, outputs/<date>/<time>",
    "long": "many minutes (the test suite)",
}
SHIPPED_DATA_TASKS = ("arith_mc",)  # built-in tasks whose data ships with evalflow (no hub, no ../shared)
MODEL_FREE = ("show", "validate", "ls")  # subcommands that load no model
FOLDER_READERS = ("explain",)  # subcommands that read run folders (no extra needed)
READ_ONLY = ("ls", "cat", "head")  # plain commands a runnable block may use to look at what a run wrote
MAX_LIMIT = 20

_MARKER = re.compile(r"<!--\s*(runnable(?::\s*slow)?|needs:[^>]*?)\s*-->")
_FENCE = re.compile(r'^```(\S*)(?:.*\btitle="([^"]+)")?')


@dataclass(frozen=True)
class Block:
    """One fenced block, the marker right above it (None: no marker) and its title (a file's path)."""

    page: str
    line: int  # the fence's line, 1-based
    lang: str
    marker: str | None
    text: str
    file: str | None = None

    @property
    def runnable(self) -> bool:
        return self.marker in ("runnable", "runnable: slow")

    @property
    def slow(self) -> bool:
        return self.marker == "runnable: slow"

    def commands(self) -> list[str]:
        """The block's command lines: continuations joined, comments and blank lines dropped."""
        joined = re.sub(r"\\\n\s*", " ", self.text)
        lines = [ln.split(" #")[0].strip() for ln in joined.splitlines()]
        return [ln for ln in lines if ln and not ln.startswith("#")]


def doc_files() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def blocks(text: str, page: str) -> list[Block]:
    """Every fenced block of a page, with the marker on the line above its fence."""
    found, lines, i = [], text.splitlines(), 0
    while i < len(lines):
        fence = _FENCE.match(lines[i])
        if not fence:
            i += 1
            continue
        end = next(j for j in range(i + 1, len(lines)) if lines[j].startswith("```"))
        above = _MARKER.fullmatch(lines[i - 1].strip()) if i else None
        marker = re.sub(r"^runnable:\s*", "runnable: ", above.group(1)) if above else None
        text = "\n".join(lines[i + 1 : end]) + "\n"
        found.append(Block(page, i + 1, fence.group(1), marker, text, fence.group(2)))
        i = end + 1
    return found


def all_blocks() -> list[Block]:
    return [
        b for path in doc_files() for b in blocks(path.read_text(encoding="utf-8"), path.relative_to(ROOT).as_posix())
    ]


def marking_problems(page_blocks: list[Block]) -> list[str]:
    """Each shell block without a marker, each ``needs:`` word not in NEEDS, each runnable marker
    above a block that is not shell: where it is and what to write."""
    problems = []
    for b in page_blocks:
        where = f"{b.page}:{b.line}"
        if b.lang in SHELL_LANGS and b.marker is None:
            problems.append(
                f"{where}: a ```{b.lang} block needs <!-- runnable --> or <!-- needs: ... --> right above it"
            )
        elif b.runnable and b.lang != "bash":
            problems.append(f"{where}: <!-- {b.marker} --> sits above a ```{b.lang} block; only ```bash blocks run")
        elif b.marker and b.marker.startswith("needs:"):
            words = [w.strip() for w in b.marker[6:].split(",")]
            problems += [f"{where}: needs '{w}' is not one of {', '.join(NEEDS)}" for w in words if w not in NEEDS]
    return problems


@dataclass(frozen=True)
class PageFiles:
    """What a page's titled blocks define: the tasks and the Python modules a runnable line may use."""

    files: dict[str, str]

    @classmethod
    def of(cls, page_blocks: list[Block]) -> PageFiles:
        return cls({b.file: b.text for b in page_blocks if b.file})

    def tasks(self) -> set[str]:
        names = set()
        for path, text in self.files.items():
            if path.endswith((".yaml", ".yml")):
                names |= set(re.findall(r"^(?:task|group): *([\w.-]+) *$", text, flags=re.MULTILINE))
        return names

    def modules(self) -> set[str]:
        return {Path(p).stem for p in self.files if p.endswith(".py")}

    def write(self, folder: Path) -> None:
        for path, text in self.files.items():
            (folder / path).parent.mkdir(parents=True, exist_ok=True)
            (folder / path).write_text(text, encoding="utf-8")


def _values(args: list[str], key: str) -> list[str]:
    """The values of ``key=`` among ``args``, a ``[a,b]`` list split."""
    found = []
    for arg in args:
        if arg.startswith(f"{key}="):
            found += [v.strip() for v in arg.split("=", 1)[1].strip("[]").split(",") if v.strip()]
    return found


def _relative(path: str) -> bool:
    return not path.startswith(("/", "~")) and ".." not in Path(path).parts


def check_command(line: str, page: PageFiles, *, slow: bool = False) -> list[str]:
    """The argv of a runnable line, refused unless it needs nothing beyond the install and the
    page's own files (and, ``slow``, the real SmolLM2 model)."""
    words = shlex.split(line)
    if words[0] in READ_ONLY:
        assert all(_relative(w) for w in words[1:] if not w.startswith("-")), f"read only what the page wrote: {line}"
        return words
    assert words[:3] == ["python", "-m", "evalflow"], (
        f"a runnable line is python -m evalflow or {', '.join(READ_ONLY)}: {line}"
    )
    args = words[3:]
    assert all(_relative(p) for p in _values(args, "include_path")), (
        f"include_path names a folder the page writes: {line}"
    )
    if args and args[0] in FOLDER_READERS:
        assert all(_relative(a) for a in args[1:]), f"{args[0]} reads run folders the page's lines wrote: {line}"
        return words
    tasks = _values(args, "task")
    allowed = set(SHIPPED_DATA_TASKS) | page.tasks()
    assert all(t in allowed for t in tasks), (
        f"runnable lines use a task whose data ships or that the page writes: {line}"
    )
    if args and args[0] in MODEL_FREE:
        return words
    assert tasks, f"a runnable run names its task: {line}"
    own = {v.split(":")[0] for v in _values(args, "model.type")} | set(_values(args, "imports"))
    uses_own_class = bool(own) and own <= page.modules()
    models = ["model=dummy"] + (["model=smollm2"] if slow else [])
    assert any(m in args for m in models) or uses_own_class, (
        f"a runnable run uses {' or '.join(models)}, or model.type= a class the page writes: {line}"
    )
    limits = [float(v) for v in _values(args, "limit")]
    assert limits and all(v <= MAX_LIMIT for v in limits), f"a small limit (at most {MAX_LIMIT}): {line}"
    return words


def with_folders(words: list[str], folder: Path, index: int) -> list[str]:
    """A run's cache and run folder inside ``folder`` (unless the line names its own)."""
    args = words[3:] if words[:3] == ["python", "-m", "evalflow"] else []
    if not args or args[0] in FOLDER_READERS or args[0] == "ls":
        return words
    extra = [] if any(a.startswith("cache_dir=") for a in args) else [f"cache_dir={folder / 'cache'}"]
    if args[0] not in MODEL_FREE:
        key = "hydra.sweep.dir" if "-m" in args or "--multirun" in args else "hydra.run.dir"
        extra += [] if any(a.startswith(f"{key}=") for a in args) else [f"{key}={folder / f'run-{index}'}"]
    return words + extra


def run_page(page_blocks: list[Block], folder: Path, *, slow: bool) -> None:
    """Write the page's files into ``folder`` and run its runnable lines of that tier, in order."""
    files = PageFiles.of(page_blocks)
    files.write(folder)
    lines = [line for b in page_blocks if b.runnable and b.slow == slow for line in b.commands()]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
    for index, line in enumerate(lines):
        words = with_folders(check_command(line, files, slow=slow), folder, index)
        if words[:3] == ["python", "-m", "evalflow"]:
            words = [sys.executable, *words[1:]]
        done = subprocess.run(words, cwd=folder, env=env, capture_output=True, text=True, timeout=600, check=False)
        assert done.returncode == 0, f"{page_blocks[0].page}: {line}\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}"
