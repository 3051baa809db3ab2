"""Build the optional compiled core of admission (``guardrails/_csrc``); metadata lives in pyproject.toml.

``optional=True``: without a C compiler or the Python headers the build goes
on without it and ``guardrails`` runs its pure-Python admission.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "guardrails._ccore",
            [
                f"guardrails/_csrc/{name}.c"
                for name in (
                    "module",
                    "canonical",
                    "flat_schema",
                    "json_text",
                    "triggers",
                    "tokenset",
                    "audit_row",
                    "sha256",
                    "tuples",
                )
            ],
            depends=["guardrails/_csrc/ccore.h", "guardrails/_csrc/tokenset.h"],
            optional=True,
        )
    ]
)
