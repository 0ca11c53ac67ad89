"""Which rate makes the best ETA: replayed on the progress bench_scale.py recorded, no services.

    python scripts/eta_replay.py [var/bench_scale.json ...] [--min-recipients 1000000]

``bench_scale.py`` samples every campaign's processed count each second (``rss_samples``: the time
and the ledger's processed total). For each run of at least ``--min-recipients``, this replays
every sample from 10% to 95% done through each candidate rate and compares the ETA it gives,
(total - processed) / rate, with the time the run actually had left (its last sample):

- ``launch``: the average since the launch (the API's rate before the ledger window);
- ``wN``: the recipients of the last N seconds over N seconds (the console's was w10);
- ``mean``: the mean of w30 and ``launch``, the rate the product's ETA divides by
  (``bulk.selectors.Rate.for_eta``);

For each candidate and run: the signed error at 10, 50 and 90% done, the median absolute error
over all samples, and the share of samples within 10%. ``bulk.selectors.RATE_WINDOW_S`` was
chosen from this table (BENCHMARKS.md); re-run it on a new recording to check the choice.
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
Sample = tuple[float, int]  # (unix time, processed)
Estimator = Callable[[Sequence[Sample], int], float]
MARKS = (10, 50, 90)
WINDOWS = (10, 20, 30, 45, 60, 90)


def since_launch(samples: Sequence[Sample], i: int) -> float:
    t, processed = samples[i]
    return processed / (t - samples[0][0])


def window(seconds: float) -> Estimator:
    def rate(samples: Sequence[Sample], i: int) -> float:
        t, processed = samples[i]
        j = i
        while j > 0 and samples[j - 1][0] >= t - seconds:
            j -= 1
        t0, p0 = samples[j]
        return (processed - p0) / (t - t0) if t > t0 else 0.0

    return rate


def mean_of(*estimators: Estimator) -> Estimator:
    def rate(samples: Sequence[Sample], i: int) -> float:
        return sum(e(samples, i) for e in estimators) / len(estimators)

    return rate


def replay(run: dict[str, Any], estimator: Estimator) -> dict[str, Any]:
    samples = [(s["t"], s["processed"]) for s in run["rss_samples"]]
    total, finished = run["recipients"], samples[-1][0]
    errors: list[float] = []
    marks: dict[int, float] = {}
    for i, (t, processed) in enumerate(samples):
        if not total * 0.1 <= processed < total * 0.95:
            continue
        rate = estimator(samples, i)
        if rate <= 0:
            continue
        error = 100 * ((total - processed) / rate - (finished - t)) / (finished - t)
        errors.append(abs(error))
        for mark in (m for m in MARKS if processed >= total * m / 100):
            marks.setdefault(mark, error)
    return {
        "marks": marks,
        "median": statistics.median(errors) if errors else None,
        "within_10": sum(e <= 10 for e in errors) / len(errors) if errors else None,
    }


def candidates() -> dict[str, Estimator]:
    found: dict[str, Estimator] = {"launch": since_launch}
    found.update({f"w{w}": window(w) for w in WINDOWS})
    found["mean"] = mean_of(since_launch, window(30))
    return found


def run_name(run: dict[str, Any]) -> str:
    return f"{run['backend']} {run['recipients'] / 1e6:g}M"


def cell(result: dict[str, Any]) -> str:
    marks = " ".join(f"{result['marks'].get(m, float('nan')):+4.0f}" for m in MARKS)
    return f"{marks} | {result['median']:4.1f} {100 * result['within_10']:3.0f}%"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("json", nargs="*", type=Path, default=[ROOT / "var/bench_scale.json"])
    parser.add_argument("--min-recipients", type=int, default=1_000_000)
    args = parser.parse_args()
    runs = []
    for path in args.json:
        recorded = json.loads(path.read_text())
        found = [r for r in recorded["runs"] if r["recipients"] >= args.min_recipients]
        print(f"{path} ({recorded.get('started', '?')}): {len(found)} runs")
        runs += found
    print("per run: ETA error % at 10/50/90% done | median |error| %, share within 10%")
    print(f"{'rate':8s}" + "".join(f"  {run_name(r):^30s}" for r in runs) + "  worst mark")
    for name, estimator in candidates().items():
        results = [replay(r, estimator) for r in runs]
        worst = max(abs(v) for res in results for v in res["marks"].values())
        print(f"{name:8s}" + "".join(f"  {cell(res):30s}" for res in results) + f"  {worst:5.0f}")


if __name__ == "__main__":
    main()
