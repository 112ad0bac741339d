"""The package a graded kernel imports: a build without the answers of the notebook it grades.

Under ``tlab grade NN`` nothing in the kernel is worth reaching: the sandbox binds, read-only
and in place of the real package, a copy in which every function that computes the answer of
one of notebook NN's exercises raises ``NotImplementedError`` instead (its signature and
docstring stay, so every import still works):

- each exercise's declared answers (``exercises.json``: the reference and
  ``checks/answers.py``'s entries), and the package functions its check forbids
  (:func:`~transformer_lab.grading.scan.forbidden.forbidden_table`; a forbidden *class* stays,
  since a check may send an instance of it to the kernel, unless a method is named);
- every top-level function of the notebook's own checks (``checks/nbNN_*/``): their
  references and mistake catalogues run in the grader, never in the kernel (their classes
  stay: a check sends instances of them, such as a counting head, to the student's function).

Notebooks after NN keep the package's reference for earlier material, and the student's own
notebook is never affected: only the graded kernel gets this build. PyTorch's equivalents stay
in PyTorch (the code scan flags reaching them).

A build is made once per notebook and package version (a hash of the package's sources) under
``$TLAB_CACHE_DIR`` or the course's ``.tlab/cache``, compiled (the package's own bytecode
reused for the files left as they are), and shared by concurrent grading processes (an atomic
rename); ``tests/test_stripped_build.py`` imports every notebook's build. Standard library only.
"""

from __future__ import annotations

import ast
import compileall
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from transformer_lab.grading.scan.forbidden import forbidden_table

__all__ = [
    "PACKAGE",
    "answer_targets",
    "build",
    "strip_source",
    "cache_dir",
    "check_imports",
    "StripError",
]

PACKAGE = Path(__file__).resolve().parents[2]  # transformer_lab/
_VERSION = "3"  # of this builder: a change of the rules below makes new builds
# The package's own bytecode is copied: it stays valid for the files left as they are (same
# source mtime and size), and compileall rewrites it only for the files stripped.
_SKIP = shutil.ignore_patterns("*.pyo", ".*")


class StripError(RuntimeError):
    """The graded build could not be made (the grader then grades nothing: never a 0)."""


def cache_dir(course_root: Path) -> Path:
    """Where builds are kept: ``$TLAB_CACHE_DIR`` or the course's ``.tlab/cache``."""
    env = os.environ.get("TLAB_CACHE_DIR")
    return Path(env) if env else Path(course_root) / ".tlab" / "cache"


def _exercises(package: Path, notebook: str) -> list[dict]:
    rows = json.loads((package / "checks" / "exercises.json").read_text())["exercises"]
    return [r for r in rows if r["notebook"] == notebook]


def _module_target(dotted: str, package: Path) -> str | None:
    """``transformer_lab.attention.softmax`` -> ``transformer_lab.attention:softmax``."""
    parts = dotted.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        relative = Path(*parts[1:cut]) if cut > 1 else Path()
        if parts[0] != package.name:
            return None
        base = package / relative
        if base.with_suffix(".py").is_file() or (base / "__init__.py").is_file():
            return ".".join(parts[:cut]) + ":" + ".".join(parts[cut:])
    return None


def answer_targets(notebook: str, package: Path = PACKAGE) -> list[str]:
    """``module:qualname`` of everything the graded build of ``notebook`` leaves out."""
    forbidden = forbidden_table(str(package / "checks"))
    targets: dict[str, None] = {}
    for row in _exercises(package, notebook):
        for target in row.get("answers", []):
            targets[target] = None
        for rule in forbidden.get(row["name"], ()):
            for path in rule.paths:
                target = _module_target(path, package)
                if target:
                    targets[target] = None
    kept = _kept(package, notebook)
    return [t for t in targets if t not in kept]


def _kept(package: Path, notebook: str) -> set[str]:
    """What the notebook's honest solutions need although one of its exercises forbids it
    (``checks/answers.py`` ``KEPT``): left in, and reaching it is flagged by the code scan."""
    import runpy

    table = runpy.run_path(str(package / "checks" / "answers.py")).get("KEPT", {})
    return set(table.get(notebook[:2], ()))


def _stub(qualname: str, notebook: str) -> str:
    return (
        f"raise NotImplementedError({qualname!r} + ' is not in the graded kernel of notebook "
        f"{notebook[:2]}: the grader computes it')"
    )


def strip_source(source: str, qualnames: set[str] | None, notebook: str) -> tuple[str, set[str]]:
    """``source`` with the bodies of ``qualnames`` (every top-level function when None)
    replaced by a ``raise``; returns the new source and the qualnames replaced. A class named
    whole keeps its methods (see the module doc)."""
    tree = ast.parse(source)
    spans: list[tuple[int, int, str, str]] = []  # (first line, last line, indent, stub)

    def visit(body: list[ast.stmt], prefix: str) -> None:
        for node in body:
            if isinstance(node, ast.ClassDef):
                visit(node.body, f"{prefix}{node.name}.")
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                name = prefix + node.name
                if (qualnames is None and not prefix) or (qualnames and name in qualnames):
                    first = node.body[0]
                    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                        first = node.body[1] if len(node.body) > 1 else first  # keep the docstring
                    if first.lineno == node.lineno:
                        raise StripError(f"cannot strip {name}: its body is on its def line")
                    indent = " " * first.col_offset
                    spans.append((first.lineno, node.end_lineno or first.lineno, indent, name))

    visit(tree.body, "")
    lines = source.splitlines(keepends=True)
    for first, last, indent, name in sorted(spans, reverse=True):
        lines[first - 1 : last] = [f"{indent}{_stub(name, notebook)}\n"]
    return "".join(lines), {name for *_, name in spans}


def _key(package: Path, notebook: str) -> str:
    digest = hashlib.sha256(f"{_VERSION}:{notebook}".encode())
    for path in sorted(package.rglob("*")):
        if path.suffix in (".py", ".json") and "__pycache__" not in path.parts:
            digest.update(str(path.relative_to(package)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:20]


def _strip_tree(root: Path, targets: list[str], notebook: str) -> None:
    by_file: dict[Path, set[str]] = {}
    for target in targets:
        module, _, qualname = target.partition(":")
        relative = Path(*module.split(".")[1:])
        path = root / relative.with_suffix(".py")
        if not path.is_file():
            path = root / relative / "__init__.py"
        if not path.is_file():
            raise StripError(f"{target}: no such module in the package")
        by_file.setdefault(path, set()).add(qualname)
    for path, names in by_file.items():
        text, done = strip_source(path.read_text(encoding="utf-8"), names, notebook)
        classes = {n for n in names - done if "." not in n}  # a forbidden class stays whole
        if names - done - classes:
            raise StripError(f"{path.name}: not found: {sorted(names - done - classes)}")
        path.write_text(text, encoding="utf-8")
    for folder in (root / "checks").glob(f"nb{notebook[:2]}_*"):
        for path in folder.rglob("*.py"):
            if path.name != "__init__.py":
                text, _ = strip_source(path.read_text(encoding="utf-8"), None, notebook)
                path.write_text(text, encoding="utf-8")


def check_imports(parent: Path) -> None:
    """Import the build in a fresh interpreter, as a graded kernel does (tests/ call this for
    every notebook; the grader does not: it would cost an import of PyTorch per build)."""
    env = {**os.environ, "PYTHONPATH": str(parent), "PYTHONDONTWRITEBYTECODE": "1"}
    code = "import transformer_lab, transformer_lab.checks; print(transformer_lab.__file__)"
    done = subprocess.run(
        [sys.executable, "-P", "-c", code], capture_output=True, text=True, env=env, timeout=300
    )
    where = done.stdout.strip()
    if done.returncode != 0 or not where.startswith(str(parent)):
        detail = (done.stderr.strip().splitlines() or [where or "no output"])[-1]
        raise StripError(f"the graded build does not import ({detail})")


def build(notebook: str, course_root: Path, package: Path = PACKAGE) -> Path | None:
    """The graded build of ``notebook`` (its ``transformer_lab`` folder), made if needed; None
    when the notebook has no exercises (the package is then bound as it is)."""
    if not _exercises(package, notebook):
        return None
    final = cache_dir(course_root) / "graded-package" / f"{notebook}-{_key(package, notebook)}"
    if (final / package.name / "__init__.py").is_file():
        return final / package.name
    final.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=".build-", dir=final.parent))
    try:
        shutil.copytree(package, work / package.name, ignore=_SKIP)
        _strip_tree(work / package.name, answer_targets(notebook, package), notebook)
        if not compileall.compile_dir(str(work / package.name), quiet=1, workers=1):
            raise StripError("the graded build does not compile")
        for path in [work, *work.rglob("*")]:
            path.chmod(0o755 if path.is_dir() else 0o644)  # read by the kernel's own user
        try:
            os.rename(work, final)
        except OSError:  # another grading process made it first
            shutil.rmtree(work, ignore_errors=True)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    return final / package.name
