"""Plots a results directory of bench/runner: throughput and p99 against concurrency per peer, the
propagation latency CDF, memory over time, health-check timelines, the hot-key spread, WebSocket memory and
the rollout row's timeline. Usage: python3 bench/plot.py RESULTS_DIR (make bench runs it
with the pinned matplotlib on PYTHONPATH)."""
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def finish(fig, ax, out, name):
    """Grid, legend, layout, and the PNG written."""
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(out, name), dpi=110)
    plt.close(fig)


def main(out):
    with open(os.path.join(out, "summary.json")) as f:
        data = json.load(f)
    summary = data.get("summary") or []
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
        finish(fig, ax, out, name)

    prop = [r for r in summary if r["scenario"] == "propagation" and r.get("samplesMs")]
    if prop:
        fig, ax = plt.subplots(figsize=(7, 4.5))
        for r in prop:
            s = sorted(r["samplesMs"])
            ys = [(i + 1) / len(s) for i in range(len(s))]
            ax.step(s, ys, where="post", label=f'{r.get("variant", "push")}, {r["api"]}, {r["policies"]} policies')
        ax.set_xscale("log")
        ax.set_xlabel("policy accepted → first 200 through Envoy (ms)")
        ax.set_ylabel("fraction of changes")
        finish(fig, ax, out, "propagation.png")

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
            finish(fig, ax, out, "memory.png")

    health = data.get("health") or []
    if health:
        plot_health(out, health)
    hot = data.get("hotKey") or []
    if hot:
        plot_hotkey(out, hot)
    rollout = data.get("rollout")
    if rollout and rollout.get("cases"):
        plot_rollout(out, rollout)
    ws = data.get("webSocket") or []
    if ws:
        fig, ax = plt.subplots(figsize=(7, 4.5))
        for r in ws:
            kind = r.get("kind") or "websocket"
            pts = [(0, r["rssIdleBytes"])] + [(s["conns"], s["rssBytes"]) for s in r["steps"] or []]
            ax.plot([p[0] for p in pts], [p[1] / 2**20 for p in pts], marker="o",
                    label=f'{r["peer"]} {kind} ({r["bytesPerConnection"] / 1024:.1f} KiB/connection)')
        ax.set_xlabel("open connections (WebSocket, or idle keep-alive HTTP)")
        ax.set_ylabel("resident memory, MiB (process tree)")
        finish(fig, ax, out, "websocket.png")


def plot_health(out, health):
    """One panel per peer and variant: requests per second served by the backend that is killed, and failed
    requests, with the kill and the return marked."""
    fig, axes = plt.subplots(len(health), 1, figsize=(8, 1.9 * len(health)), sharex=False, squeeze=False)
    for ax, r in zip(axes[:, 0], health):
        bins = r["bins"] or []
        width = bins[1]["t"] - bins[0]["t"] if len(bins) > 1 else 0.25
        ts = [b["t"] for b in bins]
        ax.plot(ts, [b["killed"] / width for b in bins], color="tab:blue", label="served by the killed backend")
        ax.plot(ts, [b["total"] / width / 5 for b in bins], color="tab:gray", lw=0.8, ls=":", label="fair share (1/5 of load)")
        ax.bar(ts, [b["failed"] / width for b in bins], width=width, align="edge", color="tab:red", alpha=0.6, label="failed")
        ax.axvline(r["killAt"], color="black", lw=0.8)
        ax.axvline(r["returnAt"], color="green", lw=0.8)
        ax.set_ylabel("req/s", fontsize=8)
        ax.set_title(f'{r["peer"]}, {r["variant"]}: {r["checks"]}', fontsize=8)
        ax.tick_params(labelsize=7)
        ax.grid(True, alpha=0.3)
    axes[0, 0].legend(fontsize=7, loc="upper right")
    axes[-1, 0].set_xlabel("seconds (black: backend killed, green: started again)")
    fig.tight_layout()
    fig.savefig(os.path.join(out, "health.png"), dpi=100)
    plt.close(fig)


def plot_hotkey(out, runs):
    """The busiest backend over the mean share with one hot key, per peer and balance factor (median of the
    repetitions, whiskers to min and max), with each factor's goal as a line."""
    runs = [r for r in runs if r["workload"] == "hot"]
    peers = []
    for r in runs:
        if r["peer"] not in peers:
            peers.append(r["peer"])
    factors = sorted({r["factor"] for r in runs})
    fig, ax = plt.subplots(figsize=(7, 4.5))
    width = 0.8 / len(factors)
    for i, f in enumerate(factors):
        med, lo, hi = [], [], []
        for p in peers:
            xs = sorted(r["maxOverMean"] for r in runs if r["peer"] == p and r["factor"] == f)
            m = xs[len(xs) // 2] if len(xs) % 2 else (xs[len(xs) // 2 - 1] + xs[len(xs) // 2]) / 2 if xs else 0
            med.append(m)
            lo.append(m - (xs[0] if xs else 0))
            hi.append((xs[-1] if xs else 0) - m)
        pos = [j + (i - (len(factors) - 1) / 2) * width for j in range(len(peers))]
        ax.bar(pos, med, width=width, yerr=[lo, hi], capsize=3, label=f"factor {f}" if f else "no factor")
        if f:
            ax.axhline(f / 100, color=f"C{i}", lw=0.8, ls="--")
    ax.set_xticks(range(len(peers)), peers, fontsize=8)
    ax.set_ylabel("busiest backend's share / mean share")
    ax.set_title("one hot key (dashed: each factor's goal)", fontsize=9)
    finish(fig, ax, out, "hotkey.png")


def plot_rollout(out, rollout):
    """One panel per case of the rollout row: failed requests per bucket per Envoy over time, with the
    push, the rollout's stage changes, the rollback or success, and the fix marked."""
    cases = rollout["cases"]
    titles = {"immediate": "bad change, pushed at once", "staged": "bad change, staged",
              "staged-good": "good change, staged"}
    fig, axes = plt.subplots(len(cases), 1, figsize=(10, 2.6 * len(cases)), squeeze=False)
    for ax, c in zip(axes[:, 0], cases):
        with open(os.path.join(out, c["raw"])) as f:
            raw = json.load(f)
        width = 0.1
        top = 1
        for i, e in enumerate(raw["perEnvoy"]):
            failed = e.get("bucketFailed") or []
            ts = [j * width for j in range(len(failed))]
            ax.step(ts, failed, where="post", color=f"C{i}", label=f'{e["node"]} failed')
            reqs = e.get("bucketRequests") or []
            ax.step(ts, reqs, where="post", color=f"C{i}", lw=0.5, ls=":", alpha=0.7)
            top = max([top] + reqs)
        ax.axvline(c["pushAt"], color="black", lw=1, label="change pushed")
        for ev in c.get("events") or []:
            color = {"RolledBack": "red", "Succeeded": "green"}.get(ev["phase"], "tab:purple")
            ax.axvline(ev["t"], color=color, lw=1, ls="--")
            label = ev["phase"] if ev["phase"] != "Progressing" else f'stage {ev["stage"]}/{ev["stages"]}'
            ax.annotate(label, (ev["t"], top * 0.45), fontsize=7, color=color, rotation=90, va="bottom", ha="right")
        if c.get("fixAt", -1) >= 0:
            ax.axvline(c["fixAt"], color="tab:orange", lw=1, label="fix pushed")
        ax.set_ylim(0, top * 1.1)
        ax.set_ylabel(f"requests per {int(width * 1000)} ms", fontsize=8)
        share = 100 * c["failed"] / max(c["requests"], 1)
        ax.set_title(f'{titles.get(c["name"], c["name"])}: {c["failed"]} of {c["requests"]} requests failed ({share:.1f} %)', fontsize=9)
        ax.tick_params(labelsize=7)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))
    axes[-1, 0].set_xlabel("seconds since the case's load began (dotted: requests sent per Envoy; dashed: the rollout's "
                           "stage changes, rollback in red, success in green)", fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "rollout.png"), dpi=100)
    plt.close(fig)


if __name__ == "__main__":
    main(sys.argv[1])
