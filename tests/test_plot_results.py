"""bench/plot_results.py on a synthetic sample (tests/data/bench_sample.json, made-up numbers
shaped like bench_gemm's JSON): it writes its three PNGs and the summary tables, reads
check.sh's results.json form too, and refuses a run without results with a message."""

import json
import os
import struct
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "bench"))
import plot_results  # noqa: E402

SAMPLE = os.path.join(HERE, "data", "bench_sample.json")


def png_size(path):
    with open(path, "rb") as f:
        head = f.read(24)
    if head[:8] != b"\x89PNG\r\n\x1a\n" or head[12:16] != b"IHDR":
        raise AssertionError(f"{path} is not a PNG")
    return struct.unpack(">II", head[16:24])


class PlotResults(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.out = self.tmp.name
        with open(SAMPLE) as f:
            self.sample = json.load(f)

    def tearDown(self):
        self.tmp.cleanup()

    def run_main(self, path):
        return plot_results.main([path, "--out", self.out])

    def test_plots_and_tables_from_bench_json(self):
        self.assertEqual(self.run_main(SAMPLE), 0)
        for name in ("bandwidth.png", "floor.png", "speedup.png"):
            width, height = png_size(os.path.join(self.out, name))
            self.assertGreater(width, 400)
            self.assertGreater(height, 300)
        with open(os.path.join(self.out, "summary.md")) as f:
            summary = f.read()
        rows = [line for line in summary.splitlines() if line.startswith("| ") and not line.startswith("| model")]
        self.assertEqual(len(rows), len(self.sample["cases"]) + len(self.sample["layers"]))
        # Every measured case's time and every baseline speedup is in the table.
        for c in self.sample["cases"]:
            if "median_us" in c:
                self.assertIn(f"| {c['tokens']} | {c['median_us']:.1f} |", summary)
            for b in (c.get("baselines") or {}).values():
                if "moejit_speedup" in b:
                    self.assertIn(f"{b['moejit_speedup']:.2f}", summary)
        # Cases that did not run say why.
        self.assertIn("time budget of 100 s spent", summary)
        self.assertIn("synthetic failure", summary)
        self.assertIn("0.90 us", summary)  # host overhead

    def test_reads_check_script_results(self):
        path = os.path.join(self.out, "results.json")
        with open(path, "w") as f:
            json.dump({"schema": "moejit-gpu-check/1", "verdict": "pass", "bench": self.sample}, f)
        self.assertEqual(self.run_main(path), 0)
        self.assertTrue(os.path.exists(os.path.join(self.out, "speedup.png")))

    def test_refuses_a_run_without_results(self):
        path = os.path.join(self.out, "results.json")
        with open(path, "w") as f:
            json.dump({"schema": "moejit-gpu-check/1", "verdict": "no_gpu", "bench": None,
                       "bench_error": "no GPU"}, f)
        self.assertEqual(self.run_main(path), 1)
        self.assertFalse(os.path.exists(os.path.join(self.out, "bandwidth.png")))


if __name__ == "__main__":
    unittest.main()
