"""The ``mtp`` GGUF variant: MTP (NextN) sidecars, the MTP head of a target checkpoint in the target's own
architecture (``qwen35``, ``qwen35moe``, ``qwen3next``, ``glm4moe``, ``glm-dsa``, ``deepseek2``, ``nemotron_h_moe``,
``deepseek4``, ``mimo2``, ``deepseek32``), as upstream's
``convert_hf_to_gguf.py --mtp`` writes it.

- :mod:`.mtp`: the converter family (``hf2gguf TARGET --mtp``), with each family's header and name knowledge
  in its own module (:mod:`.qwen`: the Qwen3.5 / Qwen3-Next mixin; :mod:`.glm`: GLM-4.5's ``Glm4MoeModel``;
  :mod:`.glm_dsa`: GLM-5's ``GlmMoeDsaModel``, with :mod:`.transforms`' MLA ``kv_b_proj`` split;
  :mod:`.glm_lite`: GLM-4.7-Flash's ``Glm4MoeLiteModel`` (GLM-5's MLA layer without the indexer, DeepseekV2's header);
  :mod:`.nemotron`: Nemotron-H's ``NemotronHModel``; :mod:`.deepseek4`: DeepSeek-V4's ``DeepseekV4Model``, whose
  FP8 and FP4 sources are read with DeepSeek-V4's ``variants/dsv4/blockscaled.py``; :mod:`.mimo2`: MiMo-V2's
  ``MimoV2Model`` (FP8 weights dequantized, MiMo-V2.5's tensor-parallel ``qkv_proj`` regrouped by :mod:`.transforms`);
  :mod:`.deepseek32`: DeepSeek-V3.2's ``DeepseekV32Model`` (GLM-5's tables and header; block-scaled FP8 weights,
  expert stacks and ``kv_b_proj`` dequantized by :mod:`.transforms`);
  :mod:`.head`: what each hands back; :mod:`.specs`: the tensor pieces they share, the float check, expert
  stacking and the name lookup for messages); :mod:`.loader`: the loader rules of a sidecar
  (also what ``check`` applies to MTP files made by any tool); :mod:`.verify`: verify's tensor-by-tensor proof.
"""

