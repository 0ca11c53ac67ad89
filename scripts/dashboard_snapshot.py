"""The Grafana dashboard's panels on live data, drawn to docs/monitoring/dashboard.png.

    python scripts/dashboard_snapshot.py [--seconds 60] [--recipients 100000] [--online 2000]

A Prometheus server (Debian's ``prometheus`` package, unpacked by ``scripts/promtool server``)
scrapes ``/metrics`` of one Missive API process every second while ``scripts/bench_live.py``
drives traffic through its own gateway and workers on the same stores (database ``bench_live``,
Redis databases 8/9): first 1:1 sends and their live frames for ``--seconds``, then a campaign to
``--recipients`` with ``--online`` of them connected. Then every panel of
``docs/monitoring/grafana-dashboard.json`` is read back from Prometheus with the panel's own
PromQL over the run (``query_range``, 2-s steps) and drawn, one plot per panel, in the
dashboard's order. Grafana itself cannot be installed on the project's machines (no Debian or
PyPI package); this is the dashboard's queries on the data it would show, not Grafana's pixels.
Needs ``scripts/services up``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

from bench_live import ENV, free_port, prepare, start_api

ROOT = Path(__file__).resolve().parent.parent
DASHBOARD = ROOT / "docs" / "monitoring" / "grafana-dashboard.json"
PICTURE = ROOT / "docs" / "monitoring" / "dashboard.png"
STEP_S = 2
HIDDEN_LABELS = {"job", "instance", "__name__"}  # the same for every series of this run


def start_prometheus(target_port: int, data: Path) -> tuple[subprocess.Popen[bytes], int]:
    binary = subprocess.run(
        [str(ROOT / "scripts" / "promtool"), "server"], check=True, capture_output=True, text=True
    ).stdout.strip()
    config = data / "prometheus.yml"
    config.write_text(
        "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
        "scrape_configs:\n"
        "  - job_name: missive\n"
        f"    static_configs: [{{targets: ['127.0.0.1:{target_port}']}}]\n"
    )
    port = free_port()
    cmd = [binary, f"--config.file={config}", f"--storage.tsdb.path={data / 'tsdb'}"]
    cmd += [f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn"]
    proc = subprocess.Popen(cmd, cwd=data)
    for _ in range(100):
        try:
            query(port, "/-/ready")
            return proc, port
        except OSError:
            time.sleep(0.2)
    proc.kill()
    raise RuntimeError("Prometheus did not start")


def query(port: int, path: str, **params: Any) -> Any:
    url = f"http://127.0.0.1:{port}{path}"
    if params:
        url += "?" + urllib.parse.urlencode(params)
    with urllib.request.urlopen(url, timeout=30) as response:
        raw = response.read()
    return json.loads(raw) if path.startswith("/api/") else raw


def drive(args: argparse.Namespace) -> None:
    """The traffic: bench_live's latency run, then its campaign, each printing its figures."""
    script = [sys.executable, str(ROOT / "scripts" / "bench_live.py")]
    sends = ["--connections", "0", "--seconds", str(args.seconds), "--rate", "40"]
    campaign = ["--campaign", "--recipients", str(args.recipients), "--online", str(args.online)]
    for extra in (sends, campaign):
        subprocess.run([*script, *extra], cwd=ROOT, env={**os.environ, **ENV}, check=True)


def panels() -> list[dict[str, Any]]:
    return list(json.loads(DASHBOARD.read_text())["panels"])


def series(
    port: int, expr: str, start: float, end: float
) -> list[tuple[str, list[float], list[float]]]:
    """Each series of ``expr`` over the run: its label text, seconds from the start, values."""
    found = query(port, "/api/v1/query_range", query=expr, start=start, end=end, step=STEP_S)
    out = []
    for result in found["data"]["result"]:
        shown = sorted((k, v) for k, v in result["metric"].items() if k not in HIDDEN_LABELS)
        labels = ", ".join(f"{k}={v}" for k, v in shown)
        xs = [float(t) - start for t, _ in result["values"]]
        ys = [
            float(v) if v not in ("NaN", "+Inf", "-Inf") else float("nan")
            for _, v in result["values"]
        ]
        out.append((labels or expr[:40], xs, ys))
    return out


def draw(port: int, start: float, end: float) -> int:
    """One plot per panel; returns how many panels had data."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shown = panels()
    rows = (len(shown) + 2) // 3
    fig, axes = plt.subplots(rows, 3, figsize=(18, 3.6 * rows), squeeze=False)
    with_data = 0
    for ax, panel in zip(axes.flat, shown, strict=False):
        lines = [s for t in panel.get("targets", []) for s in series(port, t["expr"], start, end)]
        with_data += bool(lines)
        for label, xs, ys in lines[:8]:
            ax.plot(xs, ys, label=label[:60], linewidth=1.2)
        ax.set_title(panel.get("title", ""), fontsize=10)
        ax.set_xlabel("seconds into the run", fontsize=8)
        ax.tick_params(labelsize=8)
        if lines:
            ax.legend(fontsize=6, loc="upper left")
        else:
            ax.text(
                0.5, 0.5, "no data in this run", ha="center", va="center", transform=ax.transAxes
            )
    for ax in list(axes.flat)[len(shown) :]:
        ax.axis("off")
    fig.suptitle(
        f"Missive dashboard ({DASHBOARD.name}) on live data, "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime(start))}, {end - start:.0f} s",
        fontsize=12,
    )
    fig.tight_layout(rect=(0, 0, 1, 0.98))
    fig.savefig(PICTURE, dpi=80)
    return with_data


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--recipients", type=int, default=100_000)
    parser.add_argument("--online", type=int, default=2_000)
    args = parser.parse_args()
    prepare()
    api_port = free_port()
    api = start_api(api_port, 1)
    with tempfile.TemporaryDirectory() as data:
        prom, prom_port = start_prometheus(api_port, Path(data))
        try:
            start = time.time()
            drive(args)
            time.sleep(10)  # the last scrapes, and rate() windows past the end
            end = time.time()
            with_data = draw(prom_port, start, end)
        finally:
            for proc in (prom, api):
                proc.terminate()
                proc.wait(timeout=30)
    print(
        f"dashboard: {with_data} of {len(panels())} panels with data -> {PICTURE.relative_to(ROOT)}"
    )


if __name__ == "__main__":
    main()
