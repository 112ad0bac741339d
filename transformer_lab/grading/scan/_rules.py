"""The rules of the code scan (:mod:`.review`): what a flag names, found in NFKC-normalised code.

Two readers: :mod:`._review_tree` reads the syntax tree with the tables below (names resolved
through imports); :func:`regex_findings` applies text patterns to the code without comments
and docstrings, and is all there is for text Python cannot parse.
"""

from __future__ import annotations

import io
import re
import tokenize

__all__ = ["PATTERNS", "DOTTED", "ATTRIBUTES", "STRINGS", "regex_findings", "code_view"]

DYNAMIC = "runs generated or recompiled code"
FRAMES = "reads the call stack or the garbage collector's objects"
HOOKS = "installs an interpreter or IPython hook"
SOURCE = "reads Python source files, from which the package's reference can be recompiled"
INTERNALS = "touches the grader's internals"

# Dotted names (a name, or any attribute below it) and what using them means.
DOTTED: dict[str, str] = {
    **dict.fromkeys(
        "exec eval compile __import__ execfile runpy importlib marshal types.FunctionType "
        "types.CodeType types.LambdaType code codeop builtins.exec builtins.eval "
        "builtins.compile builtins.__import__ pickle dill cloudpickle shelve __builtins__ "
        "base64.b64decode base64.a85decode base64.b85decode base64.b32decode codecs.decode "
        "zlib.decompress lzma bz2.decompress gzip.decompress".split(),
        DYNAMIC,
    ),
    **dict.fromkeys(
        "inspect.stack inspect.currentframe inspect.getouterframes inspect.getinnerframes "
        "inspect.trace inspect.getframeinfo inspect.getgeneratorlocals inspect.getclosurevars "
        "sys._getframe sys._current_frames sys.exc_info sys.last_traceback gc "
        "traceback.extract_stack traceback.walk_stack traceback.walk_tb pdb bdb breakpoint".split(),
        FRAMES,
    ),
    **dict.fromkeys(
        "sys.settrace sys.setprofile sys.monitoring threading.settrace threading.setprofile "
        "threading.settrace_all_threads threading.setprofile_all_threads sys.addaudithook "
        "sys.excepthook sys.displayhook sys.meta_path sys.path_hooks atexit get_ipython "
        "IPython.get_ipython IPython.core builtins ipykernel sys.breakpointhook".split(),
        HOOKS,
    ),
    **dict.fromkeys(
        "inspect.getsource inspect.getsourcelines inspect.getsourcefile inspect.getfile "
        "inspect.getmodule inspect.findsource linecache pkgutil importlib.resources "
        "importlib.metadata site sysconfig".split(),
        SOURCE,
    ),
    **dict.fromkeys(
        "transformer_lab.grading transformer_lab.checks.engine".split(),  # the checks' engine
        INTERNALS,
    ),
}
# Attribute names that give these away whatever object they are read from.
ATTRIBUTES: dict[str, str] = {
    **dict.fromkeys(
        "f_back f_locals f_globals f_code f_builtins f_trace tb_frame tb_next gi_frame "
        "cr_frame ag_frame __traceback__".split(),
        FRAMES,
    ),
    **dict.fromkeys(
        "__code__ co_code __globals__ __closure__ __builtins__ __subclasses__".split(), DYNAMIC
    ),
    **dict.fromkeys("__file__ __spec__ __loader__ __cached__ get_source".split(), SOURCE),
    **dict.fromkeys(
        "input_transformers_cleanup input_transformers_post ast_transformers "
        "register_magic_function register_cell_magic register_line_magic set_custom_exc "
        "run_cell_magic run_line_magic set_hook".split(),
        HOOKS,
    ),
    **dict.fromkeys(
        "_guards _integrity _STATE _SEALED _SNAPSHOT _SEALED_CODES _SEALED_NAMESPACES TRUSTED "
        "hidden_entry HIDDEN_MIME take_snapshot _serve _HANDLES _BY_ID _GRAPHS".split(),
        INTERNALS,
    ),
}
# Names that give a trick away when written as text (getattr(sys, "_getframe"),
# attrgetter("f_locals")): every attribute above, and the distinctive names of the dotted ones.
_COMMON_WORDS = {"metadata", "resources", "monitoring", "_api", "_core", "exc_info"}
NAMES_AS_TEXT: dict[str, str] = {
    **{
        last: why
        for key, why in DOTTED.items()
        for last in [key.rpartition(".")[2]]
        if "." in key and ("_" in last or len(last) >= 8) and last not in _COMMON_WORDS
    },
    **ATTRIBUTES,
}
# Text inside string literals (paths, module names given as text).
STRINGS: list[tuple[str, str]] = [
    (r"\.pyc?\b(?!\w)|site-packages|dist-packages|transformer_lab[/\\]", SOURCE),
    (r"_guards|_integrity|_serve|checks\.engine|application/vnd\.tlab|_STATE\b", INTERNALS),
    (r"^(inspect|gc|runpy|marshal|importlib|ctypes|builtins)$", DYNAMIC),
]
# Cell magics and shell escapes that run code from elsewhere; harmless magics are not flagged.
HARMLESS_MAGICS = {"matplotlib", "time", "timeit", "precision", "pprint", "who", "whos", "config"}

# (regular expression, what the flag says): the text patterns, read on code without comments
# or docstrings. ``True`` marks the ones the syntax-tree reader replaces when the code parses.
PATTERNS: list[tuple[str, str]] = [
    (r"\bsys\s*\.\s*modules\b", "edits sys.modules"),
    (
        r"^[ \t]*(torch|np|numpy|F|nn|checks|transformer_lab)(\s*\.\s*\w+)+\s*=[^=]",
        "replaces a library function",
    ),
    (r"^[ \t]*(torch|np|numpy|F|nn|checks|transformer_lab)\s*=[^=]", "rebinds a library's name"),
    (
        r"(?<![.\w])vars\s*\(|__dict__|(?<![.\w])globals\s*\(\s*\)\s*\[",
        "edits a module's namespace",
    ),
    (
        r"TorchFunctionMode|TorchDispatchMode|__torch_function__|__torch_dispatch__",
        "overrides PyTorch's function dispatch",
    ),
    (
        r"class\s+\w+\s*\(\s*(int|float|bool|str|tuple|list|(torch\.)?Tensor)\s*\)",
        "subclasses a built-in type or Tensor",
    ),
    (
        r"def\s+__(eq|ne|bool|lt|le|gt|ge|float|int|index|hash)__",
        "overrides a comparison or conversion",
    ),
    (
        r"\bthreading\b|\b_thread\b|\bmultiprocessing\b|concurrent\.futures",
        "starts threads or processes",
    ),
    (
        r"setprofile|settrace|_getframe|currentframe|f_back|f_locals|tb_frame",
        "inspects or hooks the call stack",
    ),
    (r"__code__|__globals__|__closure__|__kwdefaults__|__defaults__", "rewrites functions"),
    (r"\bgc\s*\.|\bctypes\b|\bimportlib\b|__import__|\bbuiltins\b", "reaches into the interpreter"),
    (r"(?<![.\w])(exec|eval|compile)\s*\(|\brunpy\b", "runs generated code"),
    (
        r"(?<![.\w])open\s*\(|\bpathlib\b|\bPath\s*\(|\bshutil\b|\bos\s*\.\s*(remove|rename|listdir|scandir|walk|chdir|unlink)",
        "reads or writes files",
    ),
    (r"\bsubprocess\b|\bos\s*\.\s*(system|popen|exec\w*|spawn\w*|fork|kill)", "runs programs"),
    (r"\bsocket\b|\burllib\b|\brequests\b|\bhttp\.client\b", "uses the network"),
    (r"\benviron\b|\bgetenv\b", "reads environment variables"),
    (
        r"_guards|_integrity|_tlab|transformer_lab\.checks\.\w|application/vnd\.tlab",
        "touches the grader's internals",
    ),
    (r"publish_display_data|get_ipython|IPython(?!\.display\b)", "talks to the notebook machinery"),
    (r"gradebook|solutions/|\bsubmitted\b|autograded|feedback/", "names the course's files"),
    (
        r"(?<![.\w])(setattr|delattr)\s*\(|(?<![.\w])getattr\s*\(\s*\w+\s*,\s*(?![\s'\"])",
        "changes attributes by name",
    ),
]
# Read only where the syntax tree cannot be (the tree reader resolves these more precisely).
FALLBACK_PATTERNS: list[tuple[str, str]] = [
    (r"\binspect\s*\.\s*(stack|getsource|getouterframes|trace)\b", FRAMES),
    (r"\bsite-packages\b|\.\s*__file__\b", SOURCE),
    (r"^[ \t]*(import|from)\s+(gc|inspect|runpy|marshal|ctypes|importlib|types|atexit)\b", DYNAMIC),
]
_COMPILED = [(re.compile(p, re.MULTILINE), why) for p, why in PATTERNS]
_FALLBACK = [(re.compile(p, re.MULTILINE), why) for p, why in FALLBACK_PATTERNS]
_MAGIC = re.compile(r"^[ \t]*(%%?|!)(\w*)", re.MULTILINE)


def code_view(text: str) -> str:
    """``text`` with comments and docstrings blanked out (line numbers kept); magics kept."""
    lines = text.splitlines(keepends=True)
    python = "".join("\n" if _MAGIC.match(ln) else ln for ln in lines)
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(python).readline))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return text
    rows = [list(ln) for ln in lines]
    start_of_statement = True
    for i, tok in enumerate(tokens):
        if tok.type in (tokenize.NL, tokenize.INDENT, tokenize.DEDENT):
            continue
        docstring = (
            tok.type == tokenize.STRING
            and start_of_statement
            and i + 1 < len(tokens)
            and tokens[i + 1].type in (tokenize.NEWLINE, tokenize.ENDMARKER, tokenize.COMMENT)
        )
        if tok.type == tokenize.COMMENT or docstring:
            (r0, c0), (r1, c1) = tok.start, tok.end
            for r in range(r0, r1 + 1):
                row = rows[r - 1] if r - 1 < len(rows) else []
                lo, hi = (c0 if r == r0 else 0), (c1 if r == r1 else len(row))
                for c in range(lo, min(hi, len(row))):
                    if row[c] != "\n":
                        row[c] = " "
        start_of_statement = tok.type in (tokenize.NEWLINE, tokenize.COMMENT) or tok.string == ";"
    return "".join("".join(r) for r in rows)


def _line(text: str, lineno: int) -> str:
    lines = text.splitlines()
    return lines[lineno - 1].strip() if 0 < lineno <= len(lines) else ""


def regex_findings(text: str, parsed: bool = False) -> list[tuple[int, str, str]]:
    """(line, why, line's code) for every text pattern found (``parsed``: the tree was read)."""
    view = code_view(text)
    out = []
    for pattern, why in _COMPILED if parsed else _COMPILED + _FALLBACK:
        for match in pattern.finditer(view):
            lineno = view.count("\n", 0, match.start()) + 1
            out.append((lineno, why, _line(text, lineno)))
    for match in _MAGIC.finditer(view):
        if match.group(2) not in HARMLESS_MAGICS:
            lineno = view.count("\n", 0, match.start()) + 1
            out.append((lineno, "runs a shell command or magic", _line(text, lineno)))
    return out
