"""Build hook: a wheel carries the image recipe (compose/) and the shipped experiments.

Both folders stay at the top of the checkout, where people and the Makefile expect them; the
wheel gets copies below harness/shipped/, which harness/settings.py reads when no checkout is
around. Everything else about the package is declared in pyproject.toml.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent
# folder -> file patterns shipped from it (compose/target/ is Maven's output, never shipped)
SHIPPED = {"compose": ("*",), "experiments": ("*.yaml", "README.md")}


class BuildWithShippedFiles(build_py):
    """build_py that also copies the shipped folders into harness/shipped/ of the build."""

    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):
            return  # an editable install reads the checkout itself
        for folder, patterns in SHIPPED.items():
            target = Path(self.build_lib) / "harness" / "shipped" / folder
            target.mkdir(parents=True, exist_ok=True)
            for pattern in patterns:
                for source in sorted((HERE / folder).glob(pattern)):
                    if source.is_file():
                        shutil.copy2(source, target / source.name)


setup(cmdclass={"build_py": BuildWithShippedFiles})
