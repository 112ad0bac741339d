"""Authoring and release: what the instructor writes in solutions/ and what students receive.

    tags      the cell tags (``solution``, ``tests:N``, ``readonly``, ``id:NAME``) and what each means
    author    tags -> nbgrader metadata, checked (``tlab author``)
    release   solutions/ -> notebooks/ with nbgrader (``tlab release``)

May import ``transformer_lab.grading.course``; nothing of the grading steps.
"""
