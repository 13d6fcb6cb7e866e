# Copyright: contributors to ddp.cluster
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Draw scaling.png from a ddp_benchmark report (results.json): run on the controller.

    python3 scaling_plot.py RESULTS_JSON OUTPUT_PNG

Two panels over one x axis, the number of processes (GPUs; one per node on CPU nodes):

- top: global images/s of each run, the runs without a variant joined by a line, the ideal linear
  scaling from the 1-process run dashed, each variant (``rdma_off``, ``reference_baseline``, ...) its
  own hollow marker; from a factor of 32 between the fewest and most processes up, both axes of this panel
  are logarithmic (linear scaling stays a straight line);
- bottom: scaling efficiency (%) = throughput_N / (N x throughput_1) of the same runs (the report's
  ``efficiency``), with 100 % dotted.

Each series is drawn against the axis of its own unit, and every label is in a legend outside the
panels (right of them), so no label covers a point whatever the number of rows. Rows that are one
run (the same ``run_id``: "1 process" and "1 node" on nodes with one process each) are one point.

Exit 0 when written, 3 when matplotlib is not installed (a one-line reason on stdout), 2 on
bad input.
"""
from __future__ import annotations

import json
import sys

# Marker per variant, in the order the variants appear (cycled beyond 8).
VARIANT_MARKERS = ("s", "D", "v", "P", "X", "*", "<", ">")
VARIANT_COLORS = ("tab:orange", "tab:red", "tab:purple", "tab:brown", "tab:pink", "tab:olive", "tab:cyan",
                  "tab:gray")


def runs_of(rows):
    """The rows of a report with one entry per run: a row whose ``run_id`` an earlier row has is left out.

    :param rows: the report's rows (``run``, ``run_id``, ``variant``, ``processes``, ``global_images_per_s``,
        ``efficiency``), in table order.
    :returns: ``(base, variants)``: the runs without a variant sorted by processes, each with ``label`` (the
        names of its rows joined by " = ", e.g. ``1 process = 1 node``), and the variant runs in table order.
    """
    seen = {}
    base, variants = [], []
    for row in rows:
        run_id = row.get("run_id")
        if run_id and run_id in seen:
            seen[run_id]["label"] += " = " + str(row["run"])
            continue
        item = dict(row, label=str(row["run"]))
        if run_id:
            seen[run_id] = item
        (variants if row.get("variant") else base).append(item)
    base.sort(key=lambda r: r["processes"])
    return base, variants


def draw(rows, plt):
    """The figure of a report's rows (see the module docstring); ``plt`` is matplotlib.pyplot.

    :returns: ``(figure, top axis, efficiency axis)``.
    """
    base, variants = runs_of(rows)
    fig, (ax, eff_ax) = plt.subplots(2, 1, sharex=True, figsize=(8, 5.6), dpi=120,
                                     gridspec_kw={"height_ratios": [3, 2]})
    procs = sorted({r["processes"] for r in rows}) or [1]
    if base:
        shared = [r["label"] for r in base if " = " in r["label"]]
        ax.plot([r["processes"] for r in base], [r["global_images_per_s"] for r in base], "o-", color="tab:blue",
                label="global images/s" + "".join("\n(%s: one run)" % name for name in shared))
    ones = [r for r in base if r["processes"] == 1]
    if ones and procs[-1] > 1:
        one = ones[0]["global_images_per_s"]
        ax.plot(procs, [p * one for p in procs], "--", color="tab:gray", label="linear scaling from 1 process")
    eff = [r for r in base if r.get("efficiency") is not None]
    if eff:
        eff_ax.plot([r["processes"] for r in eff], [100.0 * r["efficiency"] for r in eff], "^-", color="tab:green",
                    label="scaling efficiency")
    for index, row in enumerate(variants):
        # Hollow and shrinking: variants on the same point stay visible, one inside the other.
        style = {"marker": VARIANT_MARKERS[index % len(VARIANT_MARKERS)], "linestyle": "none",
                 "markersize": max(4.0, 9.0 - 1.5 * index), "markerfacecolor": "none", "markeredgewidth": 1.6,
                 "color": VARIANT_COLORS[index % len(VARIANT_COLORS)]}
        name = "%s (%d process%s)" % (row["variant"], row["processes"], "" if row["processes"] == 1 else "es")
        ax.plot([row["processes"]], [row["global_images_per_s"]], label=name, **style)
        if row.get("efficiency") is not None:
            eff_ax.plot([row["processes"]], [100.0 * row["efficiency"]], label=name, **style)
    eff_values = [100.0 * r["efficiency"] for r in list(eff) + variants if r.get("efficiency") is not None]
    if eff_values:
        eff_ax.axhline(100.0, linestyle=":", color="tab:gray", linewidth=1, label="100 % (linear)")
        eff_ax.set_ylim(0, max(110.0, max(eff_values) * 1.1))
        eff_ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0, fontsize=8)
    else:
        eff_ax.set_yticks([])
        eff_ax.text(0.5, 0.5, "no efficiency: the matrix had no 1-process run", transform=eff_ax.transAxes,
                    ha="center", va="center", fontsize=8, color="tab:gray")
    tops = [r["global_images_per_s"] for r in rows]
    if ones:
        tops.append(procs[-1] * ones[0]["global_images_per_s"])
    # Beyond a factor of 32 in processes both axes of the top panel are logarithmic (linear scaling stays a
    # straight line); the efficiency panel stays linear.
    wide = procs[-1] / procs[0] >= 32
    if wide:
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_ylim(min(tops or [1.0]) / 1.5, max(tops or [1.0]) * 1.5)
    else:
        ax.set_ylim(0, max(tops or [1.0]) * 1.1)
    ax.set_ylabel("global images/s")
    eff_ax.set_ylabel("scaling efficiency (%)")
    eff_ax.set_xlabel("processes (GPUs; one per node on CPU nodes)")
    low, high = procs[0], procs[-1]
    pad = max(0.5, 0.06 * (high - low))
    ax.set_xlim((low / 1.3, high * 1.3) if wide else (low - pad, high + pad))
    ax.set_xticks(procs)
    ax.set_xticklabels([str(p) for p in procs])
    ax.minorticks_off()
    eff_ax.minorticks_off()
    ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0, fontsize=8)
    model = str(rows[0]["model"]).split(" (", maxsplit=1)[0] if rows else ""
    ax.set_title("DDP scaling: %s, %s" % (model, rows[0]["backend"] if rows else ""), fontsize=10)
    for axis in (ax, eff_ax):
        axis.grid(True, alpha=0.3)
    fig.tight_layout()
    return fig, ax, eff_ax


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
    fig, _ax, _eff_ax = draw(rows, plt)
    # The legends sit right of the panels: the saved image is grown to hold them.
    fig.savefig(argv[2], bbox_inches="tight")
    plt.close(fig)
    print("wrote %s" % argv[2])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
