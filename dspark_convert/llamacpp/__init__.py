"""llama.cpp in the loop: find/build llama-server b11434 (:mod:`.build`) and run it on 127.0.0.1, reading what it
drafted (:mod:`.server`). No module here names a draft family; nothing here is imported by the converter itself.
The test tier built on it (the three-way check, the head/embedding layouts, the target converter) lives in
``tests/llama/``; see docs/llama-server.md.
"""
