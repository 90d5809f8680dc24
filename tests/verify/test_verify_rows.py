"""verify's one interface (``dspark_convert.roles.proof``, run by ``dspark_convert.verify.rows``): every GGUF
variant's ``verify`` role is a ``PROOF`` the driver calls the same way, and the shared row helpers compare what the
variants name.
"""

from __future__ import annotations

import subprocess
import sys
from types import SimpleNamespace as Case

import numpy as np
import pytest
from conftest import ROOT

from dspark_convert.registry import VARIANTS
from dspark_convert.roles.proof import TORCH_SIDE, Forwards, Inputs, Pair, TensorChecks
from dspark_convert.verify.rows import prover


@pytest.mark.parametrize("variant", VARIANTS, ids=[v.name for v in VARIANTS])
def test_every_variant_has_one_proof(variant) -> None:  # type: ignore[no-untyped-def]
    """One interface: ``PROOF`` is a Forwards (its torch side by convention, with a forward on each side) or
    TensorChecks (no forward yet)."""
    p = prover(variant)
    assert p is not None and p is variant.role("verify").PROOF
    assert isinstance(p.needs_target, bool)
    if not variant.has_role("numpy_forward"):
        assert isinstance(p, TensorChecks) and not p.needs_target
    else:
        # a forward proof reads the target, except a Gemma 4 assistant's (the target's inputs are seeded)
        assert isinstance(p, Forwards) and p.needs_target == (variant.name != "gemma4_assistant")
        # one torch side: every forward-proved variant's torch_forward states the same four things
        side = variant.role(TORCH_SIDE)
        assert isinstance(side.ARCHITECTURES, tuple) and side.ARCHITECTURES
        assert all(callable(getattr(side, f)) for f in ("open", "counterpart", "forward"))
        # and has quality mode (against the unrounded checkpoint)
        assert callable(p.quality_rows)


def test_verify_roles_import_no_torch() -> None:
    """The roles are read by the driver before torch is needed (its 'verify needs torch' message comes later)."""
    code = ("import sys\nfrom dspark_convert.registry import VARIANTS\nfor v in VARIANTS: v.role('verify')\n"
            "import dspark_convert.verify\nprint('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert out.stdout.strip() == "False"


def _pair(ref_layers: int, got_layers: int) -> Pair:
    def case(n: int, scale: float) -> Case:
        return Case(context=np.ones((2, 3)), block_input=np.ones((4, 3)), hidden=np.full((4, 3), scale),
                    layers=[np.full((4, 3), i + 1.0) for i in range(n)], tokens=np.array([1, 2]),
                    logits=np.array([[0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]))

    return Pair([case(ref_layers, 1.0)], [case(got_layers, 2.0)], Inputs([np.ones((2, 3))], 3, 0), [0])


def test_block_trunk_rows_in_forward_order() -> None:
    rows = _pair(2, 2).block_trunk()
    assert [r.name for r in rows] == ["context projection", "block input (embeddings)", "layer 0 output",
                                      "layer 1 output", "block hidden (post-norm)"]
    assert [r.passed for r in rows] == [True, True, True, True, False]      # only the hidden state differs
    assert [r.layer for r in rows] == [None, None, 0, 1, None]


def test_layers_one_side_lacks() -> None:
    """A layer only one side has: no row (``min``), or a failing ``missing`` row with ``missing_fails``."""
    p = _pair(2, 1)
    assert [r.name for r in p.layers()] == ["layer 0 output"]
    strict = p.layers(missing_fails=True)
    assert [(r.name, r.passed, r.grade) for r in strict] == [("layer 0 output", True, "round-off"),
                                                            ("layer 1 output", False, "missing")]
    assert strict[1].detail == "2 layers in the checkpoint, 1 in the GGUF"


def test_tokens_and_draws() -> None:
    p = _pair(1, 1)
    t = p.tokens("chosen tokens", "logits")
    assert (t.agree, t.total, t.passed) == (2, 2, True)
    rng = np.random.default_rng(0)
    inputs = Inputs([np.ones((5, 2)), np.ones((7, 2))], 10, 0)
    a = inputs.anchors(rng)
    assert len(a) == 2 and all(isinstance(x, int) and 0 <= x < 10 for x in a)
    toks = inputs.next_tokens(np.random.default_rng(0))
    assert [len(t) for t in toks] == [5, 7]
