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

