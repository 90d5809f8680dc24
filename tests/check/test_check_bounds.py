"""``check`` stays bounded on hostile layer counts: one finding for the count, not one per layer it claims."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from gguf import GGUFValueType as VT
from gguf_samples import write_gguf

from dspark_convert.check import check_file


@pytest.mark.parametrize("block_count", [10**7, 2**32 - 1])
@pytest.mark.parametrize("hc", [0, 4], ids=["dflash", "deepseek-v4"])  # hc > 0: the DeepSeek-V4 DSpark rules
def test_huge_block_count_gives_one_finding_and_a_bounded_list(tmp_path: Path, block_count: int, hc: int) -> None:
    extra = [("dflash.hyper_connection.count", hc, VT.UINT32)] if hc else []
    path = write_gguf(tmp_path / "h.gguf", [("dflash.block_count", block_count, VT.UINT32),
                                            ("dflash.embedding_length", 8, VT.UINT32), *extra],
                      [("blk.0.attn_norm.weight", np.ones(8, np.float32), None)])
    findings = check_file(path)
    count = [f for f in findings if f.rule == "block-count"]
    assert [f.subject for f in count] == ["dflash.block_count"]
    assert f"is {block_count}, but the file holds only 1 tensors" in count[0].message
    assert any(f.rule == "required-key" and f.subject == "dflash.expert_count" for f in findings) == bool(hc)
    assert len(findings) < 80  # the old loops expected block_count layers: millions of findings (or hours)


def test_a_plausible_block_count_is_not_flagged(tmp_path: Path) -> None:
    path = write_gguf(tmp_path / "p.gguf", [("dflash.block_count", 1, VT.UINT32)],
                      [("blk.0.attn_norm.weight", np.ones(8, np.float32), None)])
    assert not [f for f in check_file(path) if f.rule == "block-count"]



@pytest.mark.parametrize(("heads", "kv", "flagged"), [
    (8, 2, None), (8, 3, "is 3, which does not divide head_count 8"),
    (5, [2, 2, 1], "layer 0: is 2, which does not divide head_count 5"),
    (6, [2, 3, 0], None),  # 0: a layer without attention
    ([6, 4, 4], [3, 2, 3], "layer 2: is 3, which does not divide head_count 4"),
    ([6, 4], 2, None),
], ids=["scalar-ok", "scalar", "kv-array", "kv-array-ok", "both-arrays", "head-array-ok"])
def test_gqa_ratio_is_checked_per_layer(tmp_path: Path, heads: int | list[int], kv: int | list[int],
                                        flagged: str | None) -> None:
    """head_count_kv must divide head_count in every layer with attention, whether either key is one number or a
    per-layer array (the Gemma 4 assistant writes per-layer head_count_kv)."""
    def kv_row(key: str, v: int | list[int]) -> tuple[str, object, VT]:
        return (key, v, VT.ARRAY) if isinstance(v, list) else (key, v, VT.UINT32)

    path = write_gguf(tmp_path / "g.gguf", [("dflash.block_count", 1, VT.UINT32),
                                            kv_row("dflash.attention.head_count", heads),
                                            kv_row("dflash.attention.head_count_kv", kv)],
                      [("blk.0.attn_norm.weight", np.ones(8, np.float32), None)])
    got = [f.message for f in check_file(path) if f.subject == "dflash.attention.head_count_kv"
           and f.rule == "hparam-value"]
    assert got == ([] if flagged is None else [f"{flagged} (grouped-query attention shares each K/V head among "
                                               "head_count / head_count_kv query heads)"])
