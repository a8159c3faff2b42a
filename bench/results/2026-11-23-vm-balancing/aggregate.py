"""Prints the side-by-side tables of REPORT.md from the runs' summary.json files (health-*/ and hotkey/):
python3 bench/results/2026-11-23-vm-balancing/aggregate.py"""
import glob
import json
import os

here = os.path.dirname(os.path.abspath(__file__))


def load(d):
    with open(os.path.join(d, "summary.json")) as f:
        return json.load(f)


def health():
    print("| run | variant | peer | failed | p99 before ms | p99 while dead ms | p99 after ms | while dead / before | while dead / before and after pooled | Envoy: connect failures, retries, ejections |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for d in sorted(glob.glob(os.path.join(here, "health-*"))):
        if not os.path.exists(os.path.join(d, "summary.json")):
            continue
        data = load(d)
        for h in sorted(data.get("health") or [], key=lambda h: h["variant"] != "default"):
            s = h.get("envoyStats") or {}
            env = "-"
            if s:
                env = "%d, %d, %d" % (s.get("upstream_cx_connect_fail", 0), s.get("upstream_rq_retry", 0), s.get("outlier_detection.ejections_enforced_total", 0))
            calm = h.get("p99CalmMs") or 0
            print("| %s | %s | %s | %d | %.1f | %.1f | %.1f | %.1f | %s | %s |" % (
                os.path.basename(d), h["variant"], h["peer"], h["failed"], h["p99BeforeMs"], h["p99DownMs"], h.get("p99AfterMs", 0),
                h["p99DownMs"] / h["p99BeforeMs"] if h["p99BeforeMs"] else 0, "%.1f" % (h["p99DownMs"] / calm) if calm else "-", env))


if __name__ == "__main__":
    health()
