"""The one thing pyproject.toml cannot say: conf/ and tasks/ stay at the repository's top level but
install as the packages ``evalflow.conf`` and ``evalflow.tasks``, their files as package data, so a
wheel, an sdist and an editable install all carry them (evalflow.config.packaged finds them).
Everything else about the distribution (metadata, dependencies, entry points) is in pyproject.toml."""

from setuptools import find_namespace_packages, setup

NOT_PACKAGES = ["*__pycache__*"]  # compiled files of task code run from the checkout


def data_packages(folder: str, package: str, files: str) -> dict[str, list[str]]:
    """``{package: [files]}`` for ``folder`` installed as ``package``, and for each folder inside it."""
    inside = find_namespace_packages(where=folder, exclude=NOT_PACKAGES)
    return {package: [files], **{f"{package}.{name}": [files] for name in inside}}


DATA = {**data_packages("conf", "evalflow.conf", "*.yaml"), **data_packages("tasks", "evalflow.tasks", "*")}
CODE_DATA = {
    "evalflow": ["py.typed"],
    "evalflow.lmeval_compat": ["lmeval_surface.yaml"],  # lm-eval's surface, for the surface table
    "evalflow.models.hf.fast": ["native/*.c"],  # the decode attention kernel, compiled on first use
    "evalflow.view": ["static/*"],  # evalflow view's front end: index.html, app.js, app.css
}

setup(
    # every package of evalflow/ (found namespace-style, so a folder without __init__.py is never missed)
    packages=[*find_namespace_packages(include=["evalflow*"], exclude=NOT_PACKAGES), *DATA],
    package_dir={"evalflow.conf": "conf", "evalflow.tasks": "tasks"},
    package_data={**CODE_DATA, **DATA},
)
