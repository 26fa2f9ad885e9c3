"""What pyproject.toml cannot say by itself.

- The dependencies are the Space's ``requirements.txt`` (one list for the Space, ``pip install -r`` and ``pip
  install .``), read line by line with comments removed (setuptools' own ``file:`` reader keeps inline comments).
- ``assets/`` stays at the top of the repository (the Space's layout) and is installed inside the package, as
  ``mmvet_core/assets/`` (where `mmvet_core.inputs.benchmark.ASSETS_DIR` looks first).
- Installed: ``mmvet_core`` and the app's views (``mmvet_app``), nothing under a generic top-level name."""
from pathlib import Path

from setuptools import find_namespace_packages, setup

ROOT = Path(__file__).resolve().parent


def requirements(path: Path = ROOT / "requirements.txt") -> list[str]:
    lines = (line.split("#", 1)[0].strip() for line in path.read_text(encoding="utf-8").splitlines())
    return [line for line in lines if line and not line.startswith("-")]


ASSET_PACKAGES = ["mmvet_core.assets", *(f"mmvet_core.assets.{d.name}" for d in sorted((ROOT / "assets").iterdir())
                                         if d.is_dir() and not d.name.startswith((".", "_")))]

setup(
    install_requires=requirements(),
    packages=find_namespace_packages(include=["mmvet_core", "mmvet_core.*", "mmvet_app", "mmvet_app.*"]) + ASSET_PACKAGES,
    package_dir={"mmvet_core.assets": "assets"},
    package_data={"": ["*.json", "*.md", "*.txt", "*.mako", "*.csv", "*.ini"]},
    include_package_data=False,
)
