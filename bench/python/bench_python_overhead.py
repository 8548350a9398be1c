#!/usr/bin/env python3
"""bench_python_overhead: the host time of moejit's Python API per call on a kernel-store hit,
measured without a GPU.

Like bench/overhead/bench_host_overhead (the C ABI), a device-backend moejit.Context runs on
moejit's null driver (bench/overhead/null_cuda.c, loaded through MOEJIT_CUDA_LIBRARY): a libcuda
that reports one sm_90 device, whose launches return at once and whose "device" memory is plain
host memory (cuMemAlloc_v2 is aligned_alloc). Real CUBINs are compiled by NVRTC on the first
calls; every timed call finds its kernels in the context's in-memory table.

The arrays are NullDeviceArray objects: buffers from the null driver's cuMemAlloc_v2, exported
through DLPack as kDLCUDA device 0 (a legacy "dltensor" capsule made with ctypes, with a
deleter), which moejit takes like any CUDA array with ``shape`` and a NumPy ``dtype``.

A timed call includes: moejit's Python argument checks, one DLPack export per array argument
(this file's ctypes exporter; its cost is measured and reported separately), nanobind's
conversion of the arguments, the C call (dispatch, memory-table hit, launch setup) and the null
driver's launches. It excludes any GPU work and the real driver's launch cost (a few
microseconds per launch; bench/gpu measures that on a GPU).

Prints one JSON object (or writes it to --out). --quick: a few calls, for CI.
"""

from __future__ import annotations

import argparse
import ctypes
import datetime
import importlib.util
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DRIVER_NAME = "libmoejit-null-cuda.so"

# Small shapes, as in bench_host_overhead: the host path's cost does not depend on them.
EXPERTS, HIDDEN, INTERMEDIATE, TOPK, TOKENS = 8, 256, 128, 2, 1


def fail(message: str) -> "None":
    sys.exit(f"bench_python_overhead: {message}")


# ---- The null driver ------------------------------------------------------------------------


class NullDriver:
    """The null driver's entry points this benchmark uses, through ctypes."""

    def __init__(self, path: str):
        # RTLD_LOCAL like moejit's own dlopen of the same path, which then finds this instance:
        # one library, one launch counter.
        try:
            self.lib = ctypes.CDLL(path, mode=os.RTLD_NOW | os.RTLD_LOCAL)
        except OSError as e:
            fail(f"cannot load the null driver: {e}")
        for name in ("cuInit", "cuMemAlloc_v2", "cuMemFree_v2", "cuMemcpyHtoDAsync_v2", "cuMemcpyDtoHAsync_v2",
                     "cuMemsetD8Async", "moejit_null_cuda_launches"):
            if not hasattr(self.lib, name):
                fail(f"{path} is not moejit's null driver (no {name})")
        lib = self.lib
        lib.cuInit.argtypes = [ctypes.c_uint]
        lib.cuMemAlloc_v2.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.c_size_t]
        lib.cuMemFree_v2.argtypes = [ctypes.c_uint64]
        lib.cuMemcpyHtoDAsync_v2.argtypes = [ctypes.c_uint64, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
        lib.cuMemcpyDtoHAsync_v2.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_size_t, ctypes.c_void_p]
        lib.cuMemsetD8Async.argtypes = [ctypes.c_uint64, ctypes.c_ubyte, ctypes.c_size_t, ctypes.c_void_p]
        lib.moejit_null_cuda_launches.restype = ctypes.c_ulonglong
        self._check(lib.cuInit(0), "cuInit")

    @staticmethod
    def _check(result: int, what: str) -> None:
        if result != 0:
            fail(f"null driver: {what} returned CUresult {result}")

    def alloc(self, nbytes: int) -> int:
        ptr = ctypes.c_uint64()
        self._check(self.lib.cuMemAlloc_v2(ctypes.byref(ptr), max(nbytes, 1)), "cuMemAlloc_v2")
        return ptr.value

    def free(self, ptr: int) -> None:
        self.lib.cuMemFree_v2(ptr)

    def upload(self, ptr: int, host) -> None:
        self._check(self.lib.cuMemcpyHtoDAsync_v2(ptr, host.ctypes.data, host.nbytes, None), "cuMemcpyHtoDAsync_v2")

    def download(self, host, ptr: int) -> None:
        self._check(self.lib.cuMemcpyDtoHAsync_v2(host.ctypes.data, ptr, host.nbytes, None), "cuMemcpyDtoHAsync_v2")

    def zero(self, ptr: int, nbytes: int) -> None:
        self._check(self.lib.cuMemsetD8Async(ptr, 0, nbytes, None), "cuMemsetD8Async")

    def launches(self) -> int:
        return int(self.lib.moejit_null_cuda_launches())


# ---- DLPack (legacy, unversioned "dltensor" capsules) -----------------------------------------


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int32), ("dtype", DLDataType),
                ("shape", ctypes.POINTER(ctypes.c_int64)), ("strides", ctypes.POINTER(ctypes.c_int64)),
                ("byte_offset", ctypes.c_uint64)]


class DLManagedTensor(ctypes.Structure):
    # deleter: void (*)(DLManagedTensor*), stored as a plain pointer.
    _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p)]


KDL_CUDA = 2
_CAPSULE_NAME = b"dltensor"  # PyCapsule keeps the pointer, so the bytes object must live on
_DELETER_TYPE = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
_CAPSULE_DESTRUCTOR_TYPE = ctypes.CFUNCTYPE(None, ctypes.c_void_p)

_PyCapsule_New = ctypes.pythonapi.PyCapsule_New
_PyCapsule_New.restype = ctypes.py_object
_PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
_PyCapsule_IsValid = ctypes.pythonapi.PyCapsule_IsValid
_PyCapsule_IsValid.restype = ctypes.c_int
_PyCapsule_IsValid.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
_PyCapsule_GetPointer = ctypes.pythonapi.PyCapsule_GetPointer
_PyCapsule_GetPointer.restype = ctypes.c_void_p
_PyCapsule_GetPointer.argtypes = [ctypes.c_void_p, ctypes.c_char_p]

# Exported and not yet deleted: DLManagedTensor address -> (array, slot). Holding the array keeps
# its memory alive until the consumer calls the deleter, as the DLPack contract requires.
_LIVE: dict = {}


@_DELETER_TYPE
def _deleter(managed: int) -> None:
    array, slot = _LIVE.pop(managed)
    array._free_slots.append(slot)  # reused by a later export


@_CAPSULE_DESTRUCTOR_TYPE
def _capsule_destructor(capsule: int) -> None:
    # A consumer renames the capsule ("used_dltensor") or clears this destructor; a capsule still
    # named "dltensor" was never consumed, so the tensor is deleted here.
    if _PyCapsule_IsValid(capsule, _CAPSULE_NAME):
        managed = _PyCapsule_GetPointer(capsule, _CAPSULE_NAME)
        _DELETER_TYPE(DLManagedTensor.from_address(managed).deleter)(managed)


_DELETER_ADDRESS = ctypes.cast(_deleter, ctypes.c_void_p).value
_CAPSULE_DESTRUCTOR_ADDRESS = ctypes.cast(_capsule_destructor, ctypes.c_void_p).value


def _dl_dtype(dtype) -> tuple[int, int]:
    import numpy as np
    if dtype.name == "bfloat16":
        return 4, 16  # kDLBfloat
    kind = {"i": 0, "u": 1, "f": 2}.get(dtype.kind)  # kDLInt, kDLUInt, kDLFloat
    if kind is None:
        fail(f"no DLPack code for dtype {dtype}")
    return kind, np.dtype(dtype).itemsize * 8


class _Slot:
    """One DLManagedTensor and its shape array, exported at most once at a time."""

    def __init__(self, array: "NullDeviceArray"):
        ndim = len(array.shape)
        self.shape = (ctypes.c_int64 * max(ndim, 1))(*array.shape)
        self.managed = DLManagedTensor()
        t = self.managed.dl_tensor
        t.data = array.ptr
        t.device = DLDevice(KDL_CUDA, 0)
        t.ndim = ndim
        code, bits = _dl_dtype(array.dtype)
        t.dtype = DLDataType(code, bits, 1)
        t.shape = ctypes.cast(self.shape, ctypes.POINTER(ctypes.c_int64))
        t.strides = None  # compact row-major
        t.byte_offset = 0
        self.managed.manager_ctx = None
        self.managed.deleter = _DELETER_ADDRESS
        self.address = ctypes.addressof(self.managed)


class NullDeviceArray:
    """A C-contiguous array in the null driver's device memory, exported through DLPack as CUDA
    device 0. Works only where that memory is host memory (the null driver)."""

    def __init__(self, driver: NullDriver, shape, dtype):
        import numpy as np
        self.driver = driver
        self.shape = tuple(int(d) for d in shape)
        self.dtype = np.dtype(dtype)
        self.nbytes = int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize
        self.ptr = driver.alloc(self.nbytes)
        self._free_slots: list = []

    @classmethod
    def from_numpy(cls, driver: NullDriver, host) -> "NullDeviceArray":
        import numpy as np
        host = np.ascontiguousarray(host)
        a = cls(driver, host.shape, host.dtype)
        driver.upload(a.ptr, host)
        return a

    def __dlpack_device__(self) -> tuple[int, int]:
        return (KDL_CUDA, 0)

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        # stream: the consumer's stream; nothing is pending on the null driver, so nothing to
        # order. max_version: a legacy capsule is always returned, which the spec allows.
        if dl_device is not None and tuple(dl_device) != (KDL_CUDA, 0):
            raise BufferError("NullDeviceArray lives on CUDA device 0 only")
        if copy:
            raise BufferError("NullDeviceArray cannot export a copy")
        slot = self._free_slots.pop() if self._free_slots else _Slot(self)
        _LIVE[slot.address] = (self, slot)
        return _PyCapsule_New(slot.address, _CAPSULE_NAME, _CAPSULE_DESTRUCTOR_ADDRESS)

    def __del__(self):
        if getattr(self, "ptr", 0):
            self.driver.free(self.ptr)
            self.ptr = 0


# ---- Timing -----------------------------------------------------------------------------------


def per_call_us(calls_by_name: dict, rounds: int, calls: int) -> dict:
    """Per-call time in us of each callable: `calls` back-to-back calls make one round, the
    callables take turns round by round (so a change in the machine's load reaches them all
    alike), and the median and minimum round are reported."""
    for call in calls_by_name.values():  # caches warm
        for _ in range(calls // 10 + 1):
            call()
    times = {name: [] for name in calls_by_name}
    for _ in range(rounds):
        for name, call in calls_by_name.items():
            t0 = time.perf_counter_ns()
            for _ in range(calls):
                call()
            times[name].append((time.perf_counter_ns() - t0) / calls / 1000.0)
    return {name: {"median_us": round(statistics.median(t), 3), "min_us": round(min(t), 3)}
            for name, t in times.items()}


def launches_per_call(ctx, driver, call, calls: int = 100) -> dict:
    before_stats, before_driver = ctx.stats()["launches"], driver.launches()
    for _ in range(calls):
        call()
    return {"launches_per_call": (ctx.stats()["launches"] - before_stats) / calls,
            "null_driver_launches_per_call": (driver.launches() - before_driver) / calls}


def git_commit() -> str:
    try:
        return subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def find_driver(given: str | None) -> str:
    if given:
        return given
    if os.environ.get("MOEJIT_CUDA_LIBRARY"):
        return os.environ["MOEJIT_CUDA_LIBRARY"]
    for build in sorted(REPO.glob("build*/bench/overhead/" + DRIVER_NAME)):
        return str(build)
    fail(f"no null driver: pass --driver path/to/{DRIVER_NAME} (cmake --build BUILD --target moejit_null_cuda)")
    return ""


def shown(path: str) -> str:
    """A path as results record it: relative to the repository when inside it (results are
    committed, and a machine's directories mean nothing elsewhere), else its file name."""
    resolved = Path(path).resolve()
    return str(resolved.relative_to(REPO)) if resolved.is_relative_to(REPO) else resolved.name


def run_cpp(binary: str, driver: str, quick: bool, cache_dir: str | None) -> dict:
    """bench_host_overhead in a child process, on the same null driver and store."""
    cmd = [binary, "--driver", driver] + (["--rounds", "3", "--calls", "200"] if quick else [])
    env = dict(os.environ, **({"MOEJIT_CACHE_DIR": cache_dir} if cache_dir else {}))
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
    if out.returncode != 0:
        fail(f"--cpp {binary} failed: {out.stderr.strip()}")
    j = json.loads(out.stdout)
    us = lambda d: {"median_us": round(d["median_ns"] / 1000.0, 3), "min_us": round(d["min_ns"] / 1000.0, 3)}
    return {"command": " ".join([shown(binary), "--driver", shown(driver)] + cmd[3:]), "build_commit": j.get("build_commit"), "settings": j.get("settings"),
            "grouped_gemm_indexed": dict(us(j["grouped_gemm"]), launches_per_call=j["grouped_gemm"]["launches_per_call"]),
            "fused_moe": dict(us(j["fused_moe"]), launches_per_call=j["fused_moe"]["launches_per_call"]),
            "null_driver_launch": us(j["null_driver_launch"])}


# ---- The benchmark ----------------------------------------------------------------------------


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--driver", help=f"the null driver ({DRIVER_NAME}); default $MOEJIT_CUDA_LIBRARY or "
                                    "build*/bench/overhead/ in this checkout")
    p.add_argument("--cpp", help="bench_host_overhead binary: its figures are run and reported beside these")
    p.add_argument("--out", help="write the JSON here instead of stdout")
    p.add_argument("--rounds", type=int, default=21, help="rounds; the median is reported (default 21)")
    p.add_argument("--calls", type=int, default=1000, help="calls per round (default 1000)")
    p.add_argument("--cache-dir", help="kernel store root (default: moejit's, $MOEJIT_CACHE_DIR)")
    p.add_argument("--quick", action="store_true", help="a smoke run: 2 rounds of 50 calls")
    args = p.parse_args()
    if args.quick:
        args.rounds, args.calls = 2, 50
    if args.rounds < 1 or args.calls < 1:
        fail("--rounds and --calls must be positive")

    driver_path = os.path.abspath(find_driver(args.driver))
    os.environ["MOEJIT_CUDA_LIBRARY"] = driver_path  # before moejit loads libcuda
    torch_importable = importlib.util.find_spec("torch") is not None
    driver = NullDriver(driver_path)

    try:
        import ml_dtypes
        import numpy as np
        import moejit
    except ImportError as e:
        fail(f"{e}: install the package (pip install ./python) and ml_dtypes")

    ctx = moejit.Context("device", cache_dir=args.cache_dir)
    rng = np.random.default_rng(20261129)

    # Weights: moejit.pack_weights from NumPy sources (plain MXFP4 codes) into buffers from the
    # null driver (pack_weights' allocator; by default it would ask torch for CUDA memory).
    def pack(n: int, k: int, rows: str):
        codes = rng.integers(0, 16, (EXPERTS, n, k), dtype=np.uint8)
        scales = rng.integers(124, 130, (EXPERTS, n, k // 32), dtype=np.uint8)
        return moejit.pack_weights(ctx, "plain", codes, scales, format="mxfp4", rows=rows,
                                   allocator=lambda nbytes: NullDeviceArray(driver, (nbytes,), np.uint8))

    w13 = pack(2 * INTERMEDIATE, HIDDEN, "concatenated")
    w2 = pack(HIDDEN, INTERMEDIATE, "plain")
    wg = pack(HIDDEN, HIDDEN, "plain")

    dev = lambda host: NullDeviceArray.from_numpy(driver, host)
    bf16 = ml_dtypes.bfloat16
    pairs = TOKENS * TOPK
    hidden = dev(np.ones((TOKENS, HIDDEN), bf16))
    topk_ids = dev(np.array([[3, 5]], np.int32))
    topk_weights = dev(np.array([[0.75, 0.25]], np.float32))
    output = NullDeviceArray(driver, (TOKENS, HIDDEN), bf16)
    fused_ws_bytes = moejit.fused_moe_workspace_size(ctx, w13, w2, TOKENS, TOPK)
    fused_ws = NullDeviceArray(driver, (fused_ws_bytes,), np.uint8)

    # grouped_gemm, contiguous: the two pair rows grouped by expert (experts 3 and 5).
    a_rows = dev(np.ones((pairs, HIDDEN), bf16))
    offsets = dev(np.array([0, 0, 0, 0, 1, 1, 2, 2, 2], np.int32))
    c_contig = NullDeviceArray(driver, (pairs, HIDDEN), bf16)
    # Workspaces are passed in, as an engine does (zero-filled once); one of at least 256 bytes
    # even where moejit needs none, since workspace=None makes moejit query the size every call.
    contig_ws_bytes = moejit.grouped_gemm_workspace_size(ctx, wg, a_rows, layout="contiguous")
    contig_ws = NullDeviceArray(driver, (max(contig_ws_bytes, 256),), np.uint8)
    driver.zero(contig_ws.ptr, contig_ws.nbytes)

    # grouped_gemm, indexed (the C++ benchmark's layout): routing as moe_align_block_size (block
    # 16) lays it out. A holds one row per pair (a_row_divisor 1), where the C++ benchmark reads
    # one row per token (a_row_divisor = topk): the host path is the same.
    sorted_ids = np.full(32, pairs, np.int32)
    sorted_ids[0], sorted_ids[16] = 0, 1
    sorted_ids_d = dev(sorted_ids)
    block_experts = dev(np.array([3, 5, -1, -1], np.int32))
    post_pad = dev(np.array([32], np.int32))
    c_indexed = NullDeviceArray(driver, (pairs, HIDDEN), bf16)
    indexed_ws_bytes = moejit.grouped_gemm_workspace_size(ctx, wg, a_rows, layout="indexed", block_size=16)
    indexed_ws = NullDeviceArray(driver, (max(indexed_ws_bytes, 256),), np.uint8)
    driver.zero(indexed_ws.ptr, indexed_ws.nbytes)

    def fused():
        moejit.fused_moe(ctx, hidden, w13, w2, topk_weights, topk_ids, output=output, workspace=fused_ws)

    def gemm_contiguous():
        moejit.grouped_gemm(ctx, a_rows, wg, layout="contiguous", expert_offsets=offsets, c=c_contig,
                            workspace=contig_ws)

    def gemm_indexed():
        moejit.grouped_gemm(ctx, a_rows, wg, layout="indexed", sorted_token_ids=sorted_ids_d,
                            expert_ids=block_experts, num_tokens_post_pad=post_pad, block_size=16,
                            c=c_indexed, workspace=indexed_ws)

    # First calls: kernels compiled by NVRTC (or loaded from the store) and modules loaded.
    t0 = time.perf_counter_ns()
    fused()
    gemm_contiguous()
    gemm_indexed()
    first_calls_ms = (time.perf_counter_ns() - t0) / 1e6

    result = {"benchmark": "python_host_overhead",
              "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
              "commit": git_commit(),
              "python": platform.python_version(), "numpy": np.__version__, "moejit": moejit.__version__,
              "cpu": cpu_model(), "cpus": os.cpu_count(),
              "driver": "moejit null driver (no GPU): launches return at once; device memory is host memory",
              "driver_path": shown(driver_path), "arch": ctx.arch,
              "settings": {"rounds": args.rounds, "calls_per_round": args.calls, "quick": args.quick},
              "problem": {"experts": EXPERTS, "hidden": HIDDEN, "intermediate": INTERMEDIATE, "topk": TOPK,
                          "tokens": TOKENS, "format": "mxfp4", "act": "bf16", "out": "bf16"},
              "first_calls_ms": round(first_calls_ms, 1)}

    # For attribution, the same C calls through the private extension (moejit._core), arguments
    # already converted to integers: the DLPack exports, nanobind's conversion, the C call and
    # the launches, without moejit's Python layer. And one array through DLPack as the calls pay
    # it per array argument (this file's exporter: a Python method, a capsule, the deleter called
    # back from C; and nanobind's import): moejit._core.Packed over four arrays against over two,
    # halved. Private API: skipped if those signatures change.
    from moejit import _core
    from moejit._enums import DTYPES, EPILOGUES, LAYOUTS
    bf, silu = DTYPES["bf16"], EPILOGUES["silu"]

    def core_fused():
        _core.fused_moe(ctx._core, w13._packed, w2._packed, bf, bf, silu, TOKENS, TOPK, 0, 0, hidden, topk_ids,
                        topk_weights, None, output, fused_ws, 0)

    def core_contiguous():
        _core.grouped_gemm(ctx._core, wg._packed, bf, bf, LAYOUTS["contiguous"], EPILOGUES["none"], pairs, 0, 1, 0,
                           a_rows, HIDDEN, c_contig, HIDDEN, None, None, None, offsets, None, None, contig_ws, 0)

    def packed(zeros, bias):
        _core.Packed(ctx._core, 1, 32, 5, EXPERTS, HIDDEN, HIDDEN, False, contig_ws, indexed_ws, zeros, bias)

    timed = {"fused_moe": fused, "grouped_gemm_contiguous": gemm_contiguous, "grouped_gemm_indexed": gemm_indexed}
    private = {"core_fused_moe": core_fused, "core_grouped_gemm_contiguous": core_contiguous,
               "packed_4": lambda: packed(contig_ws, indexed_ws), "packed_2": lambda: packed(None, None)}
    try:
        for call in private.values():
            call()
        timed.update(private)
        private_error = None
    except TypeError as e:
        private_error = f"a signature in moejit._core changed: {e}"

    times = per_call_us(timed, args.rounds, args.calls)
    for name, call in (("fused_moe", fused), ("grouped_gemm_contiguous", gemm_contiguous),
                       ("grouped_gemm_indexed", gemm_indexed)):
        result[name] = dict(times[name], **launches_per_call(ctx, driver, call))
    if private_error is None:
        result["extension_only"] = {"fused_moe": times["core_fused_moe"],
                                    "grouped_gemm_contiguous": times["core_grouped_gemm_contiguous"]}
        result["python_layer_us"] = {k: round(result[k]["median_us"] - v["median_us"], 3)
                                     for k, v in result["extension_only"].items()}
        result["dlpack_import_us"] = {
            "median_us": round((times["packed_4"]["median_us"] - times["packed_2"]["median_us"]) / 2, 3)}
    else:
        result["extension_only"] = result["python_layer_us"] = result["dlpack_import_us"] = {"skipped": private_error}
    result["arrays_per_call"] = {"fused_moe": 5, "grouped_gemm_contiguous": 4, "grouped_gemm_indexed": 6}
    if args.cpp:
        result["cpp"] = run_cpp(args.cpp, driver_path, args.quick, args.cache_dir)
    result["torch"] = {
        "importable": torch_importable,
        "note": "not measured: torch.ops.moejit.* take CUDA tensors, which torch cannot make without a GPU; "
                "the GPU run measures that path"}
    result["stats"] = ctx.stats()
    result["included"] = (
        "per call: moejit's Python argument checks, one DLPack export per array (this benchmark's ctypes "
        "exporter; see dlpack_import_us), nanobind's argument conversion, the C call (dispatch, memory-table hit, "
        "launch setup) and the null driver's launches (which return at once); no GPU work, no real driver")
    if result["stats"]["compiles"] + result["stats"]["disk_hits"] == 0 and result["stats"]["memory_hits"] == 0:
        fail("no kernel was resolved: the calls did not reach the kernel table")
    ctx.close()

    text = json.dumps(result, indent=2)
    if args.out:
        Path(args.out).write_text(text + "\n")
    else:
        print(text)


if __name__ == "__main__":
    main()
