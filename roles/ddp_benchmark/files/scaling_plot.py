# Copyright: contributors to ddp.cluster
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Draw scaling.png from a ddp_benchmark report (results.json): run on the controller.

    python3 scaling_plot.py RESULTS_JSON OUTPUT_PNG

Left axis: global images/s against the number of processes (GPUs), one point per run, the
runs without a variant joined by a line, with the ideal linear scaling from the 1-process
run dashed. Right axis: scaling efficiency (%). Variants are marked and labelled.

Exit 0 when written, 3 when matplotlib is not installed (a one-line reason on stdout), 2 on
bad input.
"""
from __future__ import annotations

import json
import sys


def main(argv):
    if len(argv) != 3:
        print("usage: scaling_plot.py RESULTS_JSON OUTPUT_PNG", file=sys.stderr)
        return 2
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        print("scaling.png not written: matplotlib is not installed for %s (%s); pip install matplotlib"
              % (sys.executable, exc))
        return 3
    try:
        with open(argv[1]) as fh:
            rows = json.load(fh)["rows"]
    except (OSError, ValueError, KeyError) as exc:
        print("cannot read the report %s: %s" % (argv[1], exc), file=sys.stderr)
        return 2
    base = [r for r in rows if not r.get("variant")]
    variants = [r for r in rows if r.get("variant")]
    fig, ax = plt.subplots(figsize=(7, 4.2), dpi=120)
    xs = [r["processes"] for r in base]
    ax.plot(xs, [r["global_images_per_s"] for r in base], "o-", color="tab:blue", label="global images/s")
    ones = [r for r in base if r["processes"] == 1]
    if ones and xs:
        top = max(xs)
        ax.plot([1, top], [ones[0]["global_images_per_s"], top * ones[0]["global_images_per_s"]], "--",
                color="tab:gray", label="linear scaling")
    for r in variants:
        ax.plot([r["processes"]], [r["global_images_per_s"]], "s", color="tab:orange")
        ax.annotate(r["variant"], (r["processes"], r["global_images_per_s"]), textcoords="offset points",
                    xytext=(5, -10), fontsize=8)
    ax.set_xlabel("processes (GPUs)")
    ax.set_ylabel("global images/s")
    ax.set_xticks(sorted({r["processes"] for r in rows}))
    eff = [r for r in base if r.get("efficiency") is not None]
    if eff:
        ax2 = ax.twinx()
        ax2.plot([r["processes"] for r in eff], [100.0 * r["efficiency"] for r in eff], "^:", color="tab:green",
                 label="efficiency")
        ax2.set_ylabel("scaling efficiency (%)")
        ax2.set_ylim(0, max(110.0, max(100.0 * r["efficiency"] for r in eff) + 10))
        lines = ax.get_legend_handles_labels()
        more = ax2.get_legend_handles_labels()
        ax.legend(lines[0] + more[0], lines[1] + more[1], loc="upper left", fontsize=8)
    else:
        ax.legend(loc="upper left", fontsize=8)
    model = str(rows[0]["model"]).split(" (", maxsplit=1)[0] if rows else ""
    ax.set_title("DDP scaling: %s, %s" % (model, rows[0]["backend"] if rows else ""), fontsize=10)
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    fig.savefig(argv[2])
    print("wrote %s" % argv[2])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
