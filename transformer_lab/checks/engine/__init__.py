"""The checks' engine, shared by every exercise: running seeded cases and comparing outputs
(core, expect), the evidence and diagnosis of a wrong output (evidence, diagnose, fallback,
attention_evidence), how the checks speak (messages), what they trust and forbid (guards), the
verdict as data (api: ``checks.diagnose``) and the grader's requests in the kernel (serve).

Nothing here knows one exercise; each notebook's checks live in ``checks/nbNN_<notebook>/``.
"""
