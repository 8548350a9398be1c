"""moejit.torch on CUDA tensors (the device backend): calls queued on torch's current stream
without waiting for the GPU, CUDA graph capture and replay, FusedMoE and torch.compile on the
GPU. Skipped without a GPU that torch can use."""

from __future__ import annotations

import io

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="moejit.torch needs PyTorch (pip install moejit[torch])")
if not torch.cuda.is_available():
    pytest.skip("needs a CUDA GPU: torch.cuda.is_available() is False", allow_module_level=True)

import moejit  # noqa: E402
import moejit.torch as mt  # noqa: E402
from test_torch import (E, H, I, TOPK, bf16_hidden, check_layer, checkpoint, expected_layer,  # noqa: E402
                        make_layer, op_args, routing)
import reference as ref  # noqa: E402
from test_torch_w4a8 import E as E8, H as H8, TOPK as TOPK8, packed_layer, quantize_e4m3  # noqa: E402

# GPU cycles torch.cuda._sleep spins for: ~0.5 s at H200 clocks, far longer than one call's
# host-side work, so a call that returns while the spin is still running did not wait for it.
SPIN_CYCLES = 1_000_000_000


@pytest.fixture(scope="module")
def device_ctx(store_dir):
    with moejit.Context("device", cache_dir=store_dir) as ctx:
        yield ctx


def cuda(*tensors):
    return tuple(t.cuda() for t in tensors)


def nan_filled(shape, dtype=torch.bfloat16):
    return torch.full(shape, float("nan"), dtype=dtype, device="cuda")


def test_queued_on_the_current_stream_without_waiting(device_ctx, rng):
    """On a side stream busy with a spin, the call returns before the spin ends (no host
    synchronization), and reads the hidden states a copy queued after the spin writes (so it
    runs on that stream: torch's side streams do not wait for the legacy default one)."""
    w13, w2, p13, p2 = make_layer(rng, device_ctx, "vllm_mxfp4")
    assert p13.qweight.is_cuda and p2.scales.is_cuda
    tokens = 8
    source = bf16_hidden(rng, tokens)
    ids, weights = routing(rng, tokens)
    hidden_source, ids_d, weights_d = cuda(source, ids, weights)
    mt.fused_moe(hidden_source, p13, p2, weights_d, ids_d)  # loads the kernels, which may wait
    workspace = torch.empty(mt.fused_moe_workspace_bytes(p13, p2, tokens, TOPK), dtype=torch.uint8, device="cuda")
    torch.cuda.synchronize()

    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        hidden = nan_filled((tokens, H))
        output = nan_filled((tokens, H))
        torch.cuda._sleep(SPIN_CYCLES)
        hidden.copy_(hidden_source)
        mt.fused_moe(hidden, p13, p2, weights_d, ids_d, output=output, workspace=workspace)
        returned_while_busy = not stream.query()
    stream.synchronize()
    assert returned_while_busy, "fused_moe waited for the GPU before returning"
    check_layer(output.cpu(), expected_layer(source, w13, w2, ids, weights), "side stream")


def test_explicit_stream_gets_the_allocations(device_ctx, rng):
    """moejit.grouped_gemm(stream=side) while torch's current stream is another: the zeroed
    workspace and the output it allocates belong to the side stream, so a spin queued there
    before the call cannot let the zero fill land after the kernel (the result would then depend
    on stale counters), and the result is the eager one on the current stream."""
    w = ref.random_quant_weights(rng, "mxfp4", E, H, I, 32, "bf16")
    packed = moejit.pack_weights(device_ctx, **{k: (v if k == "source" else torch.from_numpy(
        np.ascontiguousarray(v)).cuda()) for k, v in ref.to_vllm_mxfp4(w).items()})
    counts = torch.tensor([3, 0, 5, 1, 2, 0, 0, 4][:E], dtype=torch.int32)
    offsets = torch.cat([torch.zeros(1, dtype=torch.int32), counts.cumsum(0).to(torch.int32)]).cuda()
    a = torch.from_numpy(rng.standard_normal((int(counts.sum()), I))).to(torch.bfloat16).cuda()
    expected = moejit.grouped_gemm(device_ctx, a, packed, layout="contiguous", expert_offsets=offsets,
                                   out_dtype="f32")
    torch.cuda.synchronize()
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        torch.cuda._sleep(SPIN_CYCLES)
    c = moejit.grouped_gemm(device_ctx, a, packed, layout="contiguous", expert_offsets=offsets, out_dtype="f32",
                            stream=side.cuda_stream)
    side.synchronize()
    assert torch.equal(c, expected)


def test_default_context_on_cuda(rng, store_dir, monkeypatch):
    """context 0 with CUDA tensors: the default context of that GPU (over this session's store)."""
    monkeypatch.setenv("MOEJIT_CACHE_DIR", str(store_dir))
    ctx = mt.default_context(torch.device("cuda", torch.cuda.current_device()))
    assert ctx is mt.default_context("cuda") and ctx.backend == "device"
    w13, w2, p13, p2 = make_layer(rng, ctx, "vllm_mxfp4")
    source = bf16_hidden(rng, 3)
    ids, weights = routing(rng, 3)
    hidden, ids_d, weights_d = cuda(source, ids, weights)
    output = nan_filled((3, H))
    workspace = torch.empty(mt.fused_moe_workspace_bytes(p13, p2, 3, TOPK), dtype=torch.uint8, device="cuda")
    torch.ops.moejit.fused_moe(output, hidden, topk_weights=weights_d, topk_ids=ids_d, expert_map=None,
                               workspace=workspace, **{**op_args(ctx, p13, p2), "context": 0})
    check_layer(output.cpu(), expected_layer(source, w13, w2, ids, weights), "default CUDA context")


def test_graph_capture_replays_eager_bits(device_ctx, rng):
    """Calls captured at several token counts over one workspace sized for the largest, after
    moejit.prepare, replay with new inputs to exactly what eager calls give."""
    w13, w2, p13, p2 = make_layer(rng, device_ctx, "vllm_mxfp4")
    max_tokens = 16
    moejit.prepare(device_ctx, moejit.Model(hidden=H, intermediate=I, experts=E, topk=TOPK, format="mxfp4",
                                            max_tokens=max_tokens))
    nbytes = mt.fused_moe_workspace_bytes(p13, p2, max_tokens, TOPK, max_tokens=max_tokens)
    workspace = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
    for tokens in (1, 5, max_tokens):
        ids, weights = routing(rng, tokens)
        hidden, ids, weights = cuda(bf16_hidden(rng, tokens), ids, weights)  # int32 ids: no conversion to capture
        output = nan_filled((tokens, H))
        mt.fused_moe(hidden, p13, p2, weights, ids, output=output, workspace=workspace, max_tokens=max_tokens)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            mt.fused_moe(hidden, p13, p2, weights, ids, output=output, workspace=workspace, max_tokens=max_tokens)

        source = bf16_hidden(rng, tokens)
        new_ids, new_weights = routing(rng, tokens)
        for buffer, value in zip((hidden, ids, weights), cuda(source, new_ids, new_weights)):
            buffer.copy_(value)
        output.fill_(float("nan"))
        graph.replay()
        eager = mt.fused_moe(*cuda(source), p13, p2, *cuda(new_weights, new_ids), max_tokens=max_tokens,
                             workspace=torch.empty_like(workspace))
        torch.cuda.synchronize()
        assert torch.equal(output, eager), f"replay at {tokens} tokens differs from eager"
        check_layer(output.cpu(), expected_layer(source, w13, w2, new_ids, new_weights), f"replay, {tokens} tokens")


def test_module_on_cuda_and_its_state_dict(device_ctx, host_ctx, rng):
    """gpt-oss's layer as FusedMoE (MXFP4, interleaved gate/up rows, biases, clamped SwiGLU) from
    checkpoint tensors in host memory, packed into the GPU's; its state_dict rebuilds it bit for
    bit, and a host-backend module's state_dict runs on the GPU too (the packed layout does not
    depend on the backend). Graph capture through its reserved workspace."""
    w13 = ref.random_quant_weights(rng, "mxfp4", E, 2 * I, H, with_bias=True)
    w2 = ref.random_quant_weights(rng, "mxfp4", E, H, I, with_bias=True)
    c13, c2 = checkpoint(w13, "vllm_mxfp4", "interleaved"), checkpoint(w2, "vllm_mxfp4")

    def build(ctx):
        return mt.FusedMoE.from_checkpoint("vllm_mxfp4", c13["qweight"], c13["scales"], c2["qweight"], c2["scales"],
                                           w13_bias=c13["bias"], w2_bias=c2["bias"], rows="interleaved",
                                           activation="swiglu_oai", context=ctx)

    layer = build(device_ctx)
    assert layer.w13_qweight.is_cuda
    source = bf16_hidden(rng, 6, scale=4.0)  # large enough to reach the clamps
    ids, weights = routing(rng, 6)
    inputs = cuda(source, weights, ids)
    out = layer(*inputs, output=nan_filled((6, H)))
    expected = expected_layer(source, w13, w2, ids, weights, "swiglu_oai")
    check_layer(out.cpu(), expected, "FusedMoE on CUDA")

    saved = io.BytesIO()
    torch.save(layer.state_dict(), saved)
    saved.seek(0)
    state = torch.load(saved, map_location="cpu", weights_only=True)
    assert torch.equal(mt.FusedMoE.from_state_dict(state, context=device_ctx)(*inputs), out)
    from_host = mt.FusedMoE.from_state_dict(build(host_ctx).state_dict(), context=device_ctx)
    check_layer(from_host(*inputs).cpu(), expected, "host-packed state_dict on CUDA")

    layer.reserve_workspace(max_tokens=8, topk=TOPK)
    static = tuple(t.clone() for t in inputs)
    layer(*static)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured = layer(*static)
    new_source = bf16_hidden(rng, 6)
    new_ids, new_weights = routing(rng, 6)
    for buffer, value in zip(static, cuda(new_source, new_weights, new_ids)):
        buffer.copy_(value)
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(captured, layer(*static))
    check_layer(captured.cpu(), expected_layer(new_source, w13, w2, new_ids, new_weights, "swiglu_oai"),
                "FusedMoE replay")


def test_compile_on_cuda_fullgraph(device_ctx, rng):
    w13, w2, p13, p2 = make_layer(rng, device_ctx, "vllm_mxfp4")
    source = bf16_hidden(rng, 4)
    ids, weights = routing(rng, 4)
    inputs = cuda(source, weights, ids)
    eager = mt.fused_moe(inputs[0], p13, p2, inputs[1], inputs[2], output=nan_filled((4, H)))
    check_layer(eager.cpu(), expected_layer(source, w13, w2, ids, weights), "eager on CUDA")

    def layer(hidden, weights, ids):
        return mt.fused_moe(hidden, p13, p2, weights, ids)

    compiled = torch.compile(layer, fullgraph=True, backend="aot_eager")
    assert torch.equal(compiled(*inputs), eager)
    module = torch.compile(mt.FusedMoE(p13, p2), fullgraph=True, backend="aot_eager")
    assert torch.equal(module(*inputs), eager)


def test_opcheck_on_cuda(device_ctx, rng):
    _, _, p13, p2 = make_layer(rng, device_ctx, "vllm_mxfp4")
    ids, weights = routing(rng, 3)
    hidden, weights, ids = cuda(bf16_hidden(rng, 3), weights, ids)
    workspace = torch.empty(mt.fused_moe_workspace_bytes(p13, p2, 3, TOPK), dtype=torch.uint8, device="cuda")
    kwargs = {"topk_weights": weights, "topk_ids": ids, "expert_map": None, "workspace": workspace,
              **op_args(device_ctx, p13, p2)}
    torch.library.opcheck(torch.ops.moejit.fused_moe.default, (nan_filled((3, H)), hidden), kwargs)


def test_host_tensors_to_a_device_context_are_refused(device_ctx, rng):
    _, _, p13, p2 = make_layer(rng, device_ctx, "vllm_mxfp4")
    hidden = bf16_hidden(rng, 2)
    ids, weights = routing(rng, 2)
    with pytest.raises(moejit.InvalidArgumentError, match=r"argument 'hidden' is in cpu memory"):
        torch.ops.moejit.fused_moe(torch.empty(2, H, dtype=torch.bfloat16), hidden, topk_weights=weights,
                                   topk_ids=ids, expert_map=None, workspace=torch.empty(1 << 20, dtype=torch.uint8),
                                   **op_args(device_ctx, p13, p2))


@pytest.mark.parametrize("act_scale", ["token", "block128"])
def test_w4a8_on_cuda_matches_the_caller_quantization_and_the_reference(device_ctx, rng, act_scale):
    """W4A8 through the torch wrapper on the GPU (sm_89+): the layer's own quantization and the
    caller's float8_e4m3fn hidden states (quantized here with the documented recipe) give the
    same output, within the W4A8 end-to-end tolerance of the fp64 reference."""
    w13, w2, p13, p2 = packed_layer(rng, device_ctx)
    tokens = 6
    source = torch.from_numpy(rng.standard_normal((tokens, H8))).to(torch.bfloat16)
    ids_np, weights_np = ref.random_routing(rng, tokens, TOPK8, E8)
    hidden, ids, weights = cuda(source, torch.from_numpy(ids_np), torch.from_numpy(weights_np))
    own = mt.fused_moe(hidden, p13, p2, weights, ids, act_scale=act_scale)
    q, scales = quantize_e4m3(hidden, act_scale == "block128")
    given = mt.fused_moe(q, p13, p2, weights, ids, act_scale=act_scale, hidden_scales=scales,
                         output=nan_filled((tokens, H8)))
    torch.cuda.synchronize()
    assert torch.equal(given, own)
    expected = ref.fused_moe_reference(source.double().numpy(), w13, w2, ids_np, weights_np, "silu")
    error = np.linalg.norm(own.double().cpu().numpy() - expected) / np.linalg.norm(expected)
    assert error < 0.1, f"W4A8 end-to-end relative error {error:.3f}"
