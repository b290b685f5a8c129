"""The bench/ scripts as modules, for the unit tests of their pure parts (bench/ is not a
package: each script is loaded from its file, under its own name)."""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType

from harness.settings import REPO_ROOT


def load(name: str) -> ModuleType:
    """bench/<name>.py loaded afresh as the module `name` (and so named in sys.modules, where
    a script importing it finds it)."""
    spec = importlib.util.spec_from_file_location(name, REPO_ROOT / "bench" / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
