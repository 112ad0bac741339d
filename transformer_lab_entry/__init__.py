"""The ``tlab`` console script, started without PyTorch.

Importing anything under ``transformer_lab`` runs the package's ``__init__``, which imports
PyTorch: seconds of every ``tlab`` command, though none of them needs it until a check runs
(the grading processes, started by ``tlab grade``, load it themselves when a kernel's answer is
judged). This package sits beside ``transformer_lab`` so that importing it costs nothing; it
makes ``transformer_lab`` importable without its top level, as the grading process does
(``grading/run/driver.py``, :func:`grading_without_torch`: the top level still runs the first
time one of its names is asked for), then hands over to :func:`transformer_lab.cli.main`.
"""

from __future__ import annotations

import importlib.util
import os
import sys

__all__ = ["main"]


def _light_package() -> None:
    spec = importlib.util.find_spec("transformer_lab")  # finds the package without running it
    if spec is None or not spec.submodule_search_locations:
        return  # not installed as a folder: the ordinary import
    driver = os.path.join(spec.submodule_search_locations[0], "grading", "run", "driver.py")
    loader = importlib.util.spec_from_file_location("_tlab_driver_bootstrap", driver)
    module = importlib.util.module_from_spec(loader)
    loader.loader.exec_module(module)
    module.grading_without_torch()


def main() -> int:
    """``tlab``: what :func:`transformer_lab.cli.main` returns."""
    sys.modules.setdefault("rfc3987_syntax", None)  # as the grading process (driver.py)
    _light_package()
    from transformer_lab.cli import main as cli_main

    return cli_main()
