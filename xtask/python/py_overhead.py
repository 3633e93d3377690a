"""One `mppq_rs.quantize` job as a user runs it, for timing against `mppq quantize` on the same
model and data (docs/python.md, "Overhead against the command"):

    farm-bench --vs 'target/debug/mppq quantize M.onnx --calib DIR -o OUT --quiet' -- \
        target/mppq-venv/bin/python xtask/python/py_overhead.py M.onnx DIR OUT [--arrays]

With --arrays the batches are first loaded into NumPy arrays (the caller's own memory, printed on
stderr) and handed over as a list; without, the folder is passed as the command reads it.
"""

import sys

import numpy as np

import mppq_rs


def main() -> None:
    model, calib, out = sys.argv[1:4]
    if "--arrays" in sys.argv:
        import glob

        batches = [dict(np.load(f)) for f in sorted(glob.glob(f"{calib}/**/*.npz", recursive=True))]
        held = sum(a.nbytes for b in batches for a in b.values())
        print(f"caller's arrays: {held / 2**20:.1f} MiB in {len(batches)} batches", file=sys.stderr)
        calibration = batches
    else:
        calibration = calib
    mppq_rs.quantize(model, calibration, progress=False).save(out)


if __name__ == "__main__":
    main()
