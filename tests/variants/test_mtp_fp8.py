"""MTP sidecars of block-scaled FP8 checkpoints (``quant_method: fp8``, the -FP8 releases of Qwen3.5 / 3.6 and GLM):
upstream b11434 dequantizes every F8_E4M3 weight by its ``weight_scale_inv`` block before any family rule, and so
does dspark-convert (``variants/mtp/specs.adopt_fp8``). Byte parity with upstream's ``--mtp`` file at bf16, f16, f32
and q8_0 on four tiny checkpoints of tests/mtp_makers.py (Qwen3.5 dense with one partial 128 x 128 block per
weight; Qwen3.5-MoE with per-expert FP8 experts in 32 x 16 blocks and BF16 routers; GLM-4.5 in 64 x 32 blocks; GLM-5
in 16 x 16 blocks with ``kv_b_proj`` split after dequantization) and two ModelOpt FP8 exports (Nemotron-H with
per-tensor scales declared in ``hf_quant_config.json``, Qwen3.5 with per-channel scales), ``verify`` (its own FP8
decoding) with a mutation,
the one-line refusals, and (``llama`` tier) speculative greedy == plain greedy in llama-server.

The oracle manifests are ``tests/data/mtp/<family>-<outtype>-mtp.json``, upstream's own ``--mtp`` files of the same
checkpoints (``python tests/mtp_makers.py OUT --only qwen35-fp8 --mode mtp --outtype bf16 ... --manifests``).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from mtp_family_kit import (
    assert_identical_to_upstream,
    assert_llama_server_drafts_losslessly,
    assert_verify_proves_and_catches,
    checkpoints,
)
from safetensors.torch import load_file, save_file

from dspark_convert import convert
from dspark_convert.errors import ConvertError

#: family (tests/mtp_makers.py MAKERS) -> what it proves
CASES = {"qwen35-fp8": "Qwen3.5 dense, every linear one partial 128 x 128 block",
         "qwen35moe-fp8": "Qwen3.5-MoE, per-expert FP8 experts, 32 x 16 blocks, BF16 routers",
         "glm4moe-fp8": "GLM-4.5, 64 x 32 blocks, BF16 router",
         "glm-dsa-fp8": "GLM-5, 16 x 16 blocks, kv_b_proj split after dequantization",
         "nemotron_h_moe-modelopt-fp8": "Nemotron-H, ModelOpt FP8 per-tensor scales in hf_quant_config.json only",
         "qwen35-modelopt-fp8": "Qwen3.5 dense, ModelOpt FP8 per-channel scales in quantization_config"}


@pytest.fixture(scope="module")
def ckpts(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return checkpoints(tmp_path_factory, CASES, "mtp-fp8")


def _dtypes(ckpt: Path) -> dict[str, str]:
    blob = (ckpt / "model.safetensors").read_bytes()
    header = json.loads(blob[8:8 + int.from_bytes(blob[:8], "little")])
    return {k: v["dtype"] for k, v in header.items() if k != "__metadata__"}


@pytest.mark.parametrize("fam", sorted(CASES))
def test_fp8_sidecar_is_byte_identical_to_upstream_mtp(ckpts: dict[str, Path], fam: str, tmp_path: Path) -> None:
    dtypes = _dtypes(ckpts[fam])
    fp8 = [n for n, d in dtypes.items() if d == "F8_E4M3"]
    scale = ".weight_scale" if "modelopt" in fam else ".weight_scale_inv"
    assert len(fp8) >= 7 and all(dtypes[n.removesuffix(".weight") + scale] == "F32" for n in fp8)
    assert_identical_to_upstream(ckpts[fam], fam, tmp_path)


@pytest.mark.parametrize("fam", ["qwen35moe-fp8", "glm-dsa-fp8", "nemotron_h_moe-modelopt-fp8", "qwen35-modelopt-fp8"])
def test_verify_decodes_fp8_itself(ckpts: dict[str, Path], fam: str, tmp_path: Path) -> None:
    """Every tensor exact against the checkpoint's FP8 codes times their block, tensor or row scales, every scale
    accounted for (ModelOpt's activation scales dropped by the variant's rule); a changed value of the first expert
    stack (or of the attention output) fails that tensor only."""
    pick = (lambda n: "attn_output" in n) if fam == "qwen35-modelopt-fp8" else (lambda n: "_exps" in n)
    assert_verify_proves_and_catches(ckpts[fam], tmp_path, ("bf16", "q8_0"), pick)


def _edit(src: Path, dst: Path, edit: dict[str, object], config: dict[str, object] | None = None) -> Path:
    shutil.copytree(src, dst)
    state = load_file(str(dst / "model.safetensors"))
    for name, value in edit.items():
        if value is None:
            del state[name]
        else:
            state[name] = value  # type: ignore[assignment]
    save_file(state, str(dst / "model.safetensors"), metadata={"format": "pt"})
    if config is not None:
        cfg = json.loads((dst / "config.json").read_text())
        cfg["quantization_config"] = {**cfg["quantization_config"], **config}
        (dst / "config.json").write_text(json.dumps(cfg))
    return dst


def test_refusals_are_one_line(ckpts: dict[str, Path], tmp_path: Path) -> None:
    """A scale of the wrong shape, a scale whose weight is not FP8, a weight without its scale and a block size that
    is not two positive integers are refused in one line naming the tensor or key; nothing is written."""
    import torch

    src = ckpts["qwen35-fp8"]
    w = "mtp.layers.0.self_attn.o_proj.weight"
    state = load_file(str(src / "model.safetensors"))
    rows = state[w].shape[0]
    cases = {
        "scale-shape": ({w + "_scale_inv": torch.ones(2, 2, 2)}, None,
                        f"tensor '{w}_scale_inv' is F32 [2, 2, 2]; expected a float scale per 128x128 block of '{w}'"),
        "not-fp8": ({w: torch.zeros(rows, state[w].shape[1], dtype=torch.bfloat16)}, None,
                    f"tensor '{w}' is BF16 [{rows}, {state[w].shape[1]}] beside '{w}_scale_inv'; expected an F8_E4M3"),
        "no-scale": ({w + "_scale_inv": None}, None,
                     f"tensor '{w}' has dtype F8_E4M3 but the checkpoint has no '{w}_scale_inv' (block-scaled FP8: "
                     "one scale per 128x128 block)"),
        "block": ({}, {"weight_block_size": [128]}, "quantization_config weight_block_size is [128], expected two"),
    }
    for name, (edit, config, want) in cases.items():
        bad = _edit(src, tmp_path / name, edit, config)
        out = tmp_path / f"{name}.gguf"
        with pytest.raises(ConvertError) as e:
            convert(bad, None, out, outtype="bf16", mtp=True)
        assert want in str(e.value) and "\n" not in str(e.value), name
        assert not out.exists() and list(tmp_path.glob(f"{name}.gguf*")) == []



def test_modelopt_refusals_are_one_line(ckpts: dict[str, Path], tmp_path: Path) -> None:
    """A ModelOpt ``weight_scale`` that is neither one float nor one per row, and one beside a weight that is not FP8
    (an NVFP4 head), are refused in one line naming the file and tensor; nothing is written."""
    import torch

    src = ckpts["qwen35-modelopt-fp8"]
    w = "mtp.layers.0.self_attn.o_proj.weight"
    state = load_file(str(src / "model.safetensors"))
    rows, cols = state[w].shape
    cases = {
        "mo-scale-shape": ({w + "_scale": torch.ones(rows + 1)},
                           f"tensor '{w}_scale' is F32 [{rows + 1}]; expected one float scale, or one per row of "
                           f"'{w}' [{rows}] (ModelOpt FP8)"),
        "mo-scale-dtype": ({w + "_scale": torch.ones(rows, dtype=torch.int32)},
                           f"tensor '{w}_scale' is I32 [{rows}]; expected one float scale"),
        "mo-not-fp8": ({w: torch.zeros(rows, cols // 2, dtype=torch.uint8)},
                       f"tensor '{w}' is U8 [{rows}, {cols // 2}] beside '{w}_scale'; expected an F8_E4M3 matrix"),
    }
    for name, (edit, want) in cases.items():
        bad = _edit(src, tmp_path / name, edit)
        out = tmp_path / f"{name}.gguf"
        with pytest.raises(ConvertError) as e:
            convert(bad, None, out, outtype="bf16", mtp=True)
        assert want in str(e.value) and "\n" not in str(e.value) and "model.safetensors" in str(e.value), name
        assert not out.exists() and list(tmp_path.glob(f"{name}.gguf*")) == []


@pytest.mark.llama
def test_llama_server_drafts_losslessly_with_an_fp8_sidecar(ckpts: dict[str, Path], tmp_path: Path,
                                                           llama_bin: tuple[Path, Path]) -> None:
    assert_llama_server_drafts_losslessly(ckpts["qwen35-fp8"], tmp_path, llama_bin)
