"""Build of the compiled kernels (dspark_convert/formats/_native.c: the tensor stream's and the tokenizer reader's);
everything else is in pyproject.toml.

The extension is optional: without a C compiler the package installs without it and converts with the numpy forms
of the same kernels (same bytes, slower). -ffp-contract=off keeps every float32 multiply and add separately rounded,
as gguf-py's numpy arithmetic is.
"""

import sys

from setuptools import Extension, setup

FLAGS = [] if sys.platform == "win32" else ["-O3", "-ffp-contract=off", "-fno-math-errno"]

setup(
    ext_modules=[
        Extension(
            "dspark_convert.formats._native",
            ["dspark_convert/formats/_native.c"],
            extra_compile_args=FLAGS,
            optional=True,
        )
    ]
)
