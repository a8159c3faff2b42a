"""Plots a results directory of bench/runner: throughput and p99 against concurrency per peer, the
propagation latency CDF, and memory over time. Usage: python3 bench/plot.py RESULTS_DIR (make bench runs it
with the pinned matplotlib on PYTHONPATH)."""
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main(out):
    with open(os.path.join(out, "summary.json")) as f:
        summary = json.load(f)["summary"]
    rows = [r for r in summary if r["scenario"] == "throughput"]
    peers = []
    for r in rows:
        if r["peer"] not in peers:
            peers.append(r["peer"])
    for metric, name, label in (("rps", "throughput.png", "requests/s (median)"), ("p99Ms", "p99.png", "p99 latency, ms (median)")):
        if not rows:
            break
        fig, ax = plt.subplots(figsize=(7, 4.5))
        for p in peers:
            pts = sorted((r["conns"], r[metric]["median"], r[metric]["min"], r[metric]["max"]) for r in rows if r["peer"] == p)
            xs = [x[0] for x in pts]
            ys = [x[1] for x in pts]
            err = [[x[1] - x[2] for x in pts], [x[3] - x[1] for x in pts]]
            ax.errorbar(xs, ys, yerr=err, marker="o", capsize=3, label=p)
        ax.set_xscale("log")
        if metric == "p99Ms":
            ax.set_yscale("log")
        ax.set_xlabel("concurrent connections (wrk, one thread)")
        ax.set_ylabel(label)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(os.path.join(out, name), dpi=110)
        plt.close(fig)

    prop = [r for r in summary if r["scenario"] == "propagation" and r.get("samplesMs")]
    if prop:
        fig, ax = plt.subplots(figsize=(7, 4.5))
        for r in prop:
            s = sorted(r["samplesMs"])
            ys = [(i + 1) / len(s) for i in range(len(s))]
            ax.step(s, ys, where="post", label=f'{r["api"]}, {r["policies"]} policies')
        ax.set_xscale("log")
        ax.set_xlabel("policy accepted → first 200 through Envoy (ms)")
        ax.set_ylabel("fraction of changes")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(os.path.join(out, "propagation.png"), dpi=110)
        plt.close(fig)

    mem_path = os.path.join(out, "memory.json")
    if os.path.exists(mem_path):
        with open(mem_path) as f:
            memory = json.load(f) or []
        if memory:
            fig, ax = plt.subplots(figsize=(7, 4.5))
            for m in memory:
                pts = m["points"] or []
                ax.plot([p["t"] for p in pts], [p["rss"] / 2**20 for p in pts], label=m["peer"])
            ax.set_xlabel("seconds since the data-plane benchmark started")
            ax.set_ylabel("resident memory, MiB (process tree)")
            ax.grid(True, alpha=0.3)
            ax.legend(fontsize=8)
            fig.tight_layout()
            fig.savefig(os.path.join(out, "memory.png"), dpi=110)
            plt.close(fig)


if __name__ == "__main__":
    main(sys.argv[1])
