#!/usr/bin/env python3
"""Plot the JSON of `prac_analyze --json` (prac_analyze --png runs this for you).

    python3 scripts/plot_spectrum.py ANALYSIS.json OUT.png
    python3 scripts/plot_spectrum.py --check        # exit 0 when matplotlib imports, 3 when it does not

Two panels: the singular values (log scale) and the cumulative energy against the rank, with vertical lines
at r1 and r1 + r2 (the PRAC ranks in the JSON) and horizontal lines at 90% and 99% of the energy.
OUT's extension picks the format (.png, .pdf, .svg, ... as matplotlib writes them; another is refused).
Exit status: 0 ok, 1 bad input (or OUT's extension), 3 matplotlib missing (prac_analyze turns that into the fix).
"""

import json
import math
import os
import sys

from save_figure import other_file_at, save_figure  # scripts/save_figure.py


def import_pyplot():
    try:
        import matplotlib

        matplotlib.use("Agg")  # files only: no display needed
        import matplotlib.pyplot as plt
    except ImportError:
        print(
            f"plot_spectrum.py: matplotlib is not installed for {sys.executable}\n"
            "---> HINT: pip install matplotlib",
            file=sys.stderr,
        )
        sys.exit(3)
    return plt


def out_format_error(out):
    """None when matplotlib writes OUT's extension, else the one-line reason (savefig would raise a traceback).
    prac_analyze --png passes only .png names; a direct call may name any format matplotlib writes."""
    import_pyplot()
    from matplotlib.backend_bases import FigureCanvasBase

    formats = sorted(FigureCanvasBase.get_supported_filetypes())
    ext = os.path.splitext(out)[1].lstrip(".").lower()
    if ext in formats:
        return None
    return (f"unsupported format .{ext}" if ext else "no extension") + \
        f"; supported: {', '.join('.' + x for x in formats)}"


def check_spectrum(data):
    """prac_analyze --json's fields as plot() reads them, or a ValueError saying which is not (a file written by hand or
    by another tool gave a traceback)."""
    def numbers(key):
        v = data.get(key)
        if not isinstance(v, list) or not v or not all(isinstance(x, (int, float)) and not isinstance(x, bool)
                                                      for x in v):
            raise ValueError(f'"{key}" is {json.dumps(v)[:60]}, not a list of numbers')
        return v
    if not isinstance(data, dict):
        raise ValueError("not a JSON object")
    for key in ("singular_values", "cumulative_energy", "shape", "file"):
        if key not in data:
            raise KeyError(key)
    n = len(numbers("singular_values"))
    if len(numbers("cumulative_energy")) != n:
        raise ValueError('"cumulative_energy" and "singular_values" differ in length')
    shape = data["shape"]
    if not (isinstance(shape, list) and len(shape) == 2 and all(isinstance(d, int) for d in shape)):
        raise ValueError(f'"shape" is {json.dumps(shape)}, not [N, width]')
    if not isinstance(data["file"], str):
        raise ValueError('"file" is not a string')
    # singular values are finite, non-negative and not all zero (prac_analyze refuses such an X): a log axis of
    # nothing plotted an empty panel with exit 0
    sigma = data["singular_values"]
    if not all(math.isfinite(x) and x >= 0 for x in sigma) or max(sigma) <= 0:
        raise ValueError('"singular_values" must be finite, non-negative and not all zero')
    # the energy fraction of the leading k singular values: finite, in [0, 1], never falling (a file of NaNs
    # plotted an empty curve with exit 0)
    energy = data["cumulative_energy"]
    if not all(math.isfinite(x) and -1e-6 <= x <= 1 + 1e-6 for x in energy) or \
            any(b < a - 1e-6 for a, b in zip(energy, energy[1:])):
        raise ValueError('"cumulative_energy" must be finite fractions in [0, 1] that never fall')
    rf = data.get("reshaped_from")
    if rf is not None and not (isinstance(rf, list) and all(isinstance(d, int) and not isinstance(d, bool)
                                                            for d in rf)):
        raise ValueError(f'"reshaped_from" is {json.dumps(rf)[:60]}, not a list of dimensions')
    rk = data.get("ranks")
    if rk:
        if not (isinstance(rk, dict) and all(isinstance(rk.get(k), int) for k in ("r1", "r2"))
                and isinstance(rk.get("k"), (int, float)) and "mode" in rk):
            raise ValueError('"ranks" needs integers r1 and r2, a number k and a mode')
        if not (0 <= rk["r1"] <= n and 0 <= rk["r1"] + rk["r2"] <= n):
            raise ValueError(f'"ranks" r1 = {rk["r1"]}, r2 = {rk["r2"]} go past the {n} singular values')


def plot(data, out):
    plt = import_pyplot()
    sigma = data["singular_values"]
    energy = data["cumulative_energy"]
    n = len(sigma)
    ranks = list(range(1, n + 1))
    N, width = data["shape"]
    title = f"{os.path.basename(data['file'])}  X: ({N}, {width})"
    if data.get("reshaped_from"):
        title += "  from (" + ", ".join(str(d) for d in data["reshaped_from"]) + ")"

    # rank lines: r1 and r1 + r2 after the mode (pac: all principal, rac: all random)
    lines = []
    rk = data.get("ranks")
    if rk:
        r1, r = rk["r1"], rk["r1"] + rk["r2"]
        if r1 > 0:
            lines.append((r1, f"r1 = {r1}", "tab:red"))
        if r != r1:
            lines.append((r, f"r1 + r2 = {r}", "tab:purple"))
        title += f"\nmode {rk['mode']}, r1 = {rk['r1']}, r2 = {rk['r2']}, k = {rk['k']:.4g}"

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.8))
    fig.suptitle(title, fontsize=11)

    # singular values: zeros cannot go on a log axis; they are round-off of a rank-deficient X anyway
    pos = [(i, s) for i, s in zip(ranks, sigma) if s > 0]
    ax1.plot([i for i, _ in pos], [s for _, s in pos], color="tab:blue", lw=1.5)
    ax1.set_yscale("log")
    ax1.set_xlabel("rank i")
    ax1.set_ylabel("singular value $\\sigma_i$")
    ax1.set_title("singular values")
    ax1.grid(True, which="both", alpha=0.3)

    ax2.plot([0] + ranks, [0.0] + energy, color="tab:blue", lw=1.5, label="energy of the top r")
    for level, style in ((0.9, ":"), (0.99, "--")):
        ax2.axhline(level, color="gray", ls=style, lw=1, label=f"{level:.0%}")
    ax2.set_xlabel("rank r")
    ax2.set_ylabel("$\\sum_{i \\leq r} \\sigma_i^2 \\,/\\, \\|X\\|_F^2$")
    ax2.set_title("cumulative energy")
    ax2.set_ylim(0, 1.02)
    ax2.grid(True, alpha=0.3)

    for ax in (ax1, ax2):
        ax.set_xlim(0, n + 1)
        for x, label, color in lines:
            e = energy[x - 1]
            ax.axvline(x, color=color, lw=1.2, label=f"{label} ({e:.1%})" if ax is ax2 else None)
    ax2.legend(loc="lower right", fontsize=9)

    fig.tight_layout()
    save_figure(fig, out, dpi=120)
    plt.close(fig)


def main():
    args = sys.argv[1:]
    if args == ["--check"]:
        import_pyplot()
        return 0
    if args and args[0] in ("-h", "--help"):
        print(__doc__)
        return 0
    if len(args) != 2:
        print(__doc__, file=sys.stderr)
        return 1
    src, out = args
    bad = out_format_error(out) or other_file_at(out)
    if bad:
        print(f"plot_spectrum.py: {out}: {bad}", file=sys.stderr)
        return 1
    try:
        with open(src) as f:
            data = json.load(f)
        check_spectrum(data)
    except (OSError, ValueError, KeyError) as e:
        print(f"plot_spectrum.py: cannot read {src} as prac_analyze --json output: {e!r}", file=sys.stderr)
        return 1
    try:
        plot(data, out)
    except OSError as e:
        print(f"plot_spectrum.py: cannot write {out}: {e} (an earlier file of that name is left as it was)",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
