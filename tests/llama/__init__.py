"""The llama tier's test-only parts (outside the wheel): the three-way check (``threeway``: llama-server's drafts
against the variant's numpy reference), the head/embedding layouts (``layouts``) and the target converter for a
llama-server target (``target``). Finding, building and running llama-server stays in the package
(``dspark_convert.llamacpp.build``, ``server``)."""
