"""Build the optional compiled core of admission (``guardrails/native/_csrc``); metadata lives in pyproject.toml.

``optional=True``: without a C compiler or the Python headers the build goes
on without it and ``guardrails`` runs its pure-Python admission.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "guardrails._ccore",
            [
                f"guardrails/native/_csrc/{name}.c"
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
            depends=["guardrails/native/_csrc/ccore.h", "guardrails/native/_csrc/tokenset.h"],
            optional=True,
        )
    ]
)
