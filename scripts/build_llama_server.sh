#!/bin/sh
# Build (once) or find llama-server b11434 for the llama test tier and benchmarks; prints the binary's path.
# Cache: $DSPARK_LLAMA_CACHE or ~/.cache/dspark-convert/llama-server-b11434. An existing $DSPARK_LLAMA_SERVER is reused.
# See docs/llama-server.md.
exec "${PYTHON:-python3}" -m dspark_convert.llamacpp.build "$@"
