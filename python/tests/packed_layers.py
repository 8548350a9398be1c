"""Random MXFP4 MoE layers packed through moejit, for the tests of the quantized-activation paths."""

from __future__ import annotations

import moejit
import reference as ref


def mxfp4_layer(rng, ctx, act_dtype: str, experts: int, hidden: int, intermediate: int):
    """Logical w13 [E, 2I, H] (canonical gate/up rows) and w2 [E, H, I], and both packed from
    vLLM's MXFP4 layout for `act_dtype` activations ("bf16", "e4m3" or "e2m1")."""
    w13 = ref.random_quant_weights(rng, "mxfp4", experts, 2 * intermediate, hidden, 32, "bf16")
    w2 = ref.random_quant_weights(rng, "mxfp4", experts, hidden, intermediate, 32, "bf16")
    p13 = moejit.pack_weights(ctx, format="mxfp4", rows="concatenated", act_dtype=act_dtype,
                              **ref.to_vllm_mxfp4(ref.reorder_rows(w13, "concatenated")))
    p2 = moejit.pack_weights(ctx, format="mxfp4", act_dtype=act_dtype, **ref.to_vllm_mxfp4(w2))
    return w13, w2, p13, p2
