"""llama.cpp in the loop: find/build llama-server b11434 (:mod:`.build`), run it on 127.0.0.1 and read what it
drafted (:mod:`.server`), the tiny target as a GGUF (:mod:`.target`), head/embedding layouts and which head
llama.cpp really uses (:mod:`.layouts`), and the three-way check of llama.cpp's drafts against the numpy
reference (:mod:`.threeway`), which runs each variant's ``llama`` role (``variants/<variant>/llama.py``; the
contract is :mod:`.drafts`). No module here names a draft family. See docs/llama-server.md. Nothing here is
imported by the converter itself.
"""
