"""Writes scikit-learn's bundled 8x8 digits data set (no download) as
train.csv and test.csv into the given directory: label first, then the 64
pixel values scaled to [0, 1]."""
import os
import sys

import numpy as np
from sklearn.datasets import load_digits


def main(out_dir):
    os.makedirs(out_dir, exist_ok=True)
    digits = load_digits()
    x = digits.data.astype(np.float32) / 16.0
    y = digits.target.astype(np.float32)
    rows = np.concatenate([y[:, None], x], axis=1)
    rng = np.random.default_rng(0)
    rng.shuffle(rows)
    split = int(len(rows) * 0.8)
    np.savetxt(os.path.join(out_dir, "train.csv"), rows[:split], delimiter=",", fmt="%g")
    np.savetxt(os.path.join(out_dir, "test.csv"), rows[split:], delimiter=",", fmt="%g")
    print(f"wrote {split} training and {len(rows) - split} test rows to {out_dir}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "data")
