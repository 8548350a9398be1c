#!/usr/bin/env python3
"""Plots and tables from one GPU benchmark run.

Reads bench_gemm's JSON (or bench/gpu/check.sh's results.json, which holds it under "bench") and
writes into --out:

  bandwidth.png      achieved bandwidth vs tokens, one panel per model: moejit's layer and
                     GEMM cases, the CUTLASS baselines, and the measured copy bandwidth (the
                     memory floor's rate)
  floor.png          fraction of the floor vs tokens, one panel per model
  speedup.png        moejit's speedup over each CUTLASS baseline vs tokens, one panel per model
  summary.md         the tables the README's performance section shows

Usage: python3 bench/plot_results.py RESULTS.json --out DIR
Needs matplotlib (installed by .ci/install-deps).
"""

import argparse
import json
import math
import os
import sys
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (after choosing the backend)

BASELINES = {
    "cutlass_bf16_grouped": "CUTLASS bf16 grouped",
    "cutlass_int4_grouped": "CUTLASS int4 g128 grouped",
    "cutlass_int4_fp8_grouped": "CUTLASS int4 g128 x e4m3 grouped",
}


def load_bench(path):
    with open(path) as f:
        doc = json.load(f)
    if "bench" in doc and "cases" not in doc:  # check.sh's results.json
        if not isinstance(doc["bench"], dict):
            raise ValueError(f"{path}: no benchmark results ({doc.get('bench_error', 'bench is null')})")
        doc = doc["bench"]
    if not doc.get("cases") and not doc.get("layers"):
        raise ValueError(f"{path}: no cases or layers in the benchmark JSON")
    return doc


def measured(items):
    """The cases that ran (have a median time)."""
    return [c for c in items if isinstance(c.get("median_us"), (int, float))]


def models_of(doc):
    names = []
    for c in doc.get("layers", []) + doc.get("cases", []):
        if c["model"] not in names:
            names.append(c["model"])
    return names


def panels(n):
    cols = min(n, 2)
    rows = math.ceil(n / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(6.5 * cols, 4.2 * rows), squeeze=False)
    for ax in axes.flat[n:]:
        ax.set_visible(False)
    return fig, list(axes.flat[:n])


def title_of(doc):
    gpu = (doc.get("gpu") or {}).get("name", "unknown GPU")
    commit = (doc.get("commit") or doc.get("build_commit") or "unknown")[:10]
    return f"{gpu}, {doc.get('date', '')}, commit {commit}"


def series(items, key):
    """[(tokens, value)] sorted by tokens, for the items that have `key`."""
    pts = sorted((c["tokens"], key(c)) for c in items if key(c) is not None)
    return [p[0] for p in pts], [p[1] for p in pts]


def style_tokens_axis(ax):
    ax.set_xscale("log", base=2)
    ax.set_xlabel("tokens (T)")
    ax.grid(True, which="both", alpha=0.3)


def per_model_figure(doc, out, filename, title, draw):
    """One panel per model, each drawn by draw(ax, model); saved as out/filename."""
    models = models_of(doc)
    fig, axes = panels(len(models))
    for ax, model in zip(axes, models):
        draw(ax, model)
        style_tokens_axis(ax)
        ax.set_title(model)
    fig.suptitle(f"{title}: {title_of(doc)}")
    fig.tight_layout()
    path = os.path.join(out, filename)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_bandwidth(doc, out):
    copy_gbs = (doc.get("copy_bandwidth") or {}).get("gbs")

    def draw(ax, model):
        layers = defaultdict(list)
        for c in measured(doc.get("layers", [])):
            if c["model"] == model:
                layers[c["format"]].append(c)
        for fmt, items in layers.items():
            x, y = series(items, lambda c: c["achieved_gbs"])
            ax.plot(x, y, marker="o", linewidth=2, label=f"moejit layer {fmt}")
        gemms = defaultdict(list)
        base = defaultdict(list)
        for c in measured(doc.get("cases", [])):
            if c["model"] != model:
                continue
            gemms[(c["format"], c["projection"])].append(c)
            for name, b in (c.get("baselines") or {}).items():
                # The bf16 baseline is shared by both formats: drawn once, from its own case.
                if isinstance(b.get("achieved_gbs"), (int, float)) and b.get("weights_from", c["format"]) == c["format"]:
                    base[(name, c["projection"])].append(dict(tokens=c["tokens"], achieved_gbs=b["achieved_gbs"]))
        for (fmt, proj), items in sorted(gemms.items()):
            x, y = series(items, lambda c: c["achieved_gbs"])
            ax.plot(x, y, marker=".", linestyle="--", label=f"moejit {proj} {fmt}")
        for (name, proj), items in sorted(base.items()):
            x, y = series(items, lambda c: c["achieved_gbs"])
            ax.plot(x, y, marker="x", linestyle=":", label=f"{BASELINES.get(name, name)} {proj}")
        if copy_gbs:
            ax.axhline(copy_gbs, color="black", linewidth=1, label=f"copy {copy_gbs:.0f} GB/s")
        ax.set_ylabel("achieved GB/s (bytes that must move / time)")
        ax.legend(fontsize=7)

    return per_model_figure(doc, out, "bandwidth.png", "Achieved bandwidth", draw)


def plot_floor(doc, out):
    def draw(ax, model):
        groups = defaultdict(list)
        for c in measured(doc.get("layers", [])):
            if c["model"] == model:
                groups[f"layer {c['format']}"].append(c)
        for c in measured(doc.get("cases", [])):
            if c["model"] == model:
                groups[f"{c['projection']} {c['format']}"].append(c)
        for label, items in sorted(groups.items()):
            x, y = series(items, lambda c: c["fraction_of_floor"])
            ax.plot(x, y, marker="o" if label.startswith("layer") else ".", label=label)
        ax.axhline(0.85, color="gray", linestyle="--", linewidth=1, label="decode target 0.85")
        ax.set_ylim(0, 1.05)
        ax.set_ylabel("floor time / measured time")
        ax.legend(fontsize=7)

    return per_model_figure(doc, out, "floor.png", "Fraction of the floor", draw)


def plot_speedup(doc, out):
    def draw(ax, model):
        groups = defaultdict(list)
        for c in measured(doc.get("cases", [])):
            if c["model"] != model:
                continue
            for name, b in (c.get("baselines") or {}).items():
                if isinstance(b.get("moejit_speedup"), (int, float)):
                    groups[(name, c["format"], c["projection"])].append(
                        dict(tokens=c["tokens"], speedup=b["moejit_speedup"]))
        for (name, fmt, proj), items in sorted(groups.items()):
            x, y = series(items, lambda c: c["speedup"])
            ax.plot(x, y, marker="o", label=f"moejit {fmt} vs {BASELINES.get(name, name)}, {proj}")
        ax.axhline(1.0, color="black", linewidth=1)
        ax.set_yscale("log", base=2)
        ax.set_ylabel("speedup (baseline time / moejit time)")
        if groups:
            ax.legend(fontsize=7)
        else:
            ax.text(0.5, 0.5, "no baseline results", ha="center", transform=ax.transAxes)

    return per_model_figure(doc, out, "speedup.png", "moejit vs CUTLASS", draw)


def fmt_num(v, spec):
    return format(v, spec) if isinstance(v, (int, float)) else "-"


def summary_markdown(doc):
    lines = [f"Run: {title_of(doc)}", ""]
    copy = (doc.get("copy_bandwidth") or {}).get("gbs")
    rate = (doc.get("bf16_gemm") or {}).get("tflops")
    overhead = doc.get("host_overhead") or {}
    lines.append(f"- copy bandwidth (memory floor's rate): {fmt_num(copy, '.0f')} GB/s")
    lines.append(f"- dense bf16 GEMM rate (compute floor's rate): {fmt_num(rate, '.0f')} TFLOP/s")
    lines.append(f"- host overhead per moejit_grouped_gemm call on a hit: {fmt_num(overhead.get('overhead_us'), '.2f')} us "
                 f"(call {fmt_num(overhead.get('moejit_call_us'), '.2f')} us, bare cuLaunchKernelEx "
                 f"{fmt_num(overhead.get('raw_launch_us'), '.2f')} us)")
    lines.append("")
    layers = doc.get("layers", [])
    if layers:
        lines += ["Whole MoE layer (moejit_fused_moe), median time and fraction of the floor:", "",
                  "| model | format | T | time (us) | floor (us) | bound | fraction of floor | GB/s |",
                  "|---|---|---:|---:|---:|---|---:|---:|"]
        for c in layers:
            if "median_us" in c:
                lines.append(f"| {c['model']} | {c['format']} | {c['tokens']} | {c['median_us']:.1f} | "
                             f"{c['floor_us']:.1f} | {c['floor']['bound']} | {c['fraction_of_floor']:.2f} | "
                             f"{c['achieved_gbs']:.0f} |")
            else:
                lines.append(f"| {c['model']} | {c['format']} | {c['tokens']} | {c.get('error') or c.get('skipped')} "
                             "| | | | |")
        lines.append("")
    cases = doc.get("cases", [])
    if cases:
        lines += ["Each GEMM alone: moejit and the CUTLASS baselines (speedup = baseline time / moejit time):", "",
                  "| model | format | projection | T | moejit (us) | fraction of floor | CUTLASS bf16 (us) | speedup | "
                  "CUTLASS int4 (us) | speedup |",
                  "|---|---|---|---:|---:|---:|---:|---:|---:|---:|"]
        for c in cases:
            if "median_us" not in c:
                lines.append(f"| {c['model']} | {c['format']} | {c['projection']} | {c['tokens']} | "
                             f"{c.get('error') or c.get('skipped')} | | | | | |")
                continue
            b = c.get("baselines") or {}
            bf16 = b.get("cutlass_bf16_grouped") or {}
            # The int4 column: x bf16 for W4A16 cases, x e4m3 for W4A8 ones (one applies per case).
            int4 = next((b[k] for k in ("cutlass_int4_grouped", "cutlass_int4_fp8_grouped")
                         if "median_us" in (b.get(k) or {})), {})
            lines.append(f"| {c['model']} | {c['format']} | {c['projection']} | {c['tokens']} | {c['median_us']:.1f} | "
                         f"{c['fraction_of_floor']:.2f} | {fmt_num(bf16.get('median_us'), '.1f')} | "
                         f"{fmt_num(bf16.get('moejit_speedup'), '.2f')} | {fmt_num(int4.get('median_us'), '.1f')} | "
                         f"{fmt_num(int4.get('moejit_speedup'), '.2f')} |")
        lines.append("")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", help="bench_gemm JSON or check.sh results.json")
    parser.add_argument("--out", required=True, help="directory for the PNGs and summary.md")
    args = parser.parse_args(argv)
    try:
        doc = load_bench(args.results)
    except (OSError, ValueError, KeyError) as e:
        print(f"plot_results: {e}", file=sys.stderr)
        return 1
    os.makedirs(args.out, exist_ok=True)
    written = [plot_bandwidth(doc, args.out), plot_floor(doc, args.out), plot_speedup(doc, args.out)]
    summary = os.path.join(args.out, "summary.md")
    with open(summary, "w") as f:
        f.write(summary_markdown(doc))
    written.append(summary)
    for path in written:
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
