"""The code scan: where a flag for a person is raised. A flag never costs a point.

    flags        the scan of every file of a submission (``scan_submission``): the list of flags
    _rules       what is flagged, as patterns and names
    _names       names and aliases as the code binds them
    _tree        the findings read from Python's syntax tree
    _cells       notebook cells as the kernel runs them
    _files       which files of a submission are read, and how much
    forbidden    the package's references and PyTorch's equivalents an exercise may not reach
    similarity   copied code: fingerprints against the package (winnowing) and the class
    winnowing    the fingerprints
    source_facts what the package's source defines, read without importing it

Imports only the standard library and nbformat (it runs before PyTorch in the grading process).
"""
