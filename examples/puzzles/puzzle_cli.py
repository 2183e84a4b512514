"""What every Python puzzle shares: the common options (--device, --threads, --json, --plot),
a clean skip when --device cuda has no GPU, the header line with the thread count, an aligned
table, the JSON file and the plot. The C++ twin is puzzle_cli.h."""

from __future__ import annotations

import argparse
import json
import os
import sys

import encore


def parser(doc: str, threads: int | None = None) -> argparse.ArgumentParser:
    """An argument parser with the common options; unknown options are errors (exit status 2).
    `threads` is the default of --threads (None: OpenMP's)."""
    p = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", default="cpu", help="cpu (default) or cuda; cuda without a GPU skips (exit 0)")
    default = threads if threads is not None else "OpenMP's"
    p.add_argument("--threads", type=int, default=threads,
                   help=f"CPU threads for oneDNN and OpenBLAS (default: {default})")
    p.add_argument("--json", metavar="PATH", help="write the rows and the reports as JSON")
    p.add_argument("--plot", metavar="PATH.png", help="draw the plot (needs matplotlib)")
    return p


def setup(parser: argparse.ArgumentParser, args: argparse.Namespace) -> encore.Device:
    """Applies --threads and returns the device; exits 0 with a message when --device cuda has no
    GPU to run on (the puzzle's GPU variant is skipped, not failed). Bad values are usage errors."""
    if args.threads is not None:
        if args.threads < 1:
            parser.error("--threads must be at least 1")
        encore.set_num_threads(args.threads)
    if args.device.startswith("cuda") and not encore.cuda.is_available():
        print(f"{parser.prog}: skipped: --device {args.device}: no CUDA device ({encore.cuda.unavailable_reason()})")
        sys.exit(0)
    try:
        return encore.Device(args.device)
    except (ValueError, RuntimeError) as e:
        parser.error(f"--device: {e}")


def header(title: str, device: encore.Device) -> str:
    wait = os.environ.get("OMP_WAIT_POLICY", "unset")
    return (f"{title} on {device}, cpu threads {encore.num_threads()} (OMP_WAIT_POLICY={wait}), "
            f"encore {encore.__version__}")


def table(rows, columns) -> str:
    """Rows (dicts) as aligned text, one column per key in `columns`; floats to 4 digits."""
    def cell(v):
        if v is None:
            return "-"
        if isinstance(v, float):
            return f"{v:.4g}"
        return str(v)

    cells = [[cell(r.get(c)) for c in columns] for r in rows]
    width = [max([len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(columns)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(columns, width)).rstrip()]
    lines += ["  ".join(v.ljust(w) for v, w in zip(r, width)).rstrip() for r in cells]
    return "\n".join(lines)


def write_json(path: str, payload) -> None:
    with open(path, "w") as f:
        json.dump(payload, f, indent=1)
        f.write("\n")
    print(f"wrote {path}")


def pyplot():
    """matplotlib.pyplot drawing to files, or None (with a message) when it is not installed."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed (scripts/python_env.sh --plot installs it): no plot")
        return None
    return plt


def save_figure(fig, path: str) -> None:
    """Writes a figure drawn with pyplot() and closes it."""
    import matplotlib.pyplot as plt  # pyplot() has found it

    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)
    print(f"wrote {path}")
