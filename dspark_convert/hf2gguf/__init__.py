"""The hf2gguf verb: plan a conversion, check the destination, write the GGUF file atomically, name it."""
