"""Build the optional compiled admission core; metadata lives in pyproject.toml.

``optional=True``: without a C compiler or the Python headers the build goes
on without it and ``guardrails`` runs its pure-Python admission.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "guardrails.middleware._cadmit",
            ["guardrails/middleware/_cadmit.c"],
            optional=True,
        )
    ]
)
