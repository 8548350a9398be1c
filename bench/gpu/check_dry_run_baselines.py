"""Reads bench_gemm --dry-run JSON on stdin; exit 0 when every case lists the CUTLASS baselines a
GPU run would time for it: on sm_90a the bf16 grouped kernel always, the int4 x e4m3 kernel
exactly on the INT4 W4A8 cases (activation scales per token or per 128 k) and the int4 x bf16 kernel exactly on the INT4 W4A16 ones; on
any other target none (the kernels are built for sm_90a alone), each saying so. A build
without the kernels (-DMOEJIT_CUTLASS_KERNELS=OFF) lists the baselines that fit as "not in this
build": the same mapping, checked the same way."""

import json
import sys


def main() -> int:
    doc = json.load(sys.stdin)
    cases = doc["cases"]
    hopper = doc["arch"] == "sm_90a"
    wrong = []
    for c in cases:
        runs = {name: verdict == "runs" or "not in this build" in verdict.get("not_applicable", "")
                for name, verdict in c["baselines"].items()}
        int4 = c["format"].startswith("int4")
        w4a8 = "_w4a8" in c["format"]
        want = {
            "cutlass_bf16_grouped": hopper,
            "cutlass_int4_grouped": hopper and int4 and not w4a8,
            "cutlass_int4_fp8_grouped": hopper and int4 and w4a8,
        }
        off_target = not hopper and any(doc["arch"] not in verdict.get("not_applicable", "")
                                        for verdict in c["baselines"].values() if verdict != "runs")
        if runs != want or off_target:
            wrong.append((c["model"], c["format"], c["projection"], c["tokens"], c["baselines"]))
    for w in wrong:
        print("wrong baselines:", w)
    print(f"{len(cases)} cases, {len(wrong)} with wrong baselines")
    return 0 if cases and not wrong else 1


if __name__ == "__main__":
    sys.exit(main())
