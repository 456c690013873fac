"""Run by the peer virtualenv's python (sentence-transformers 6.2, torch), never imported.

    python quantization_check.py TEXTS_JSON MODEL_FOLDER OUT_DIR

Encodes the texts with `SentenceTransformer(MODEL_FOLDER)` once per output
precision (`encode(texts, precision=p)`, p in float32, int8, uint8, binary,
ubinary) into OUT_DIR/encode-<p>.npy; quantizes its own float32 vectors with
`quantize_embeddings` into OUT_DIR/quantize-<p>.npy; and, with the first 50
float vectors as calibration, writes the int8 / uint8 codes of the other
vectors (OUT_DIR/calibrated-<p>.npy) and the ranges sentence-transformers
takes from them (OUT_DIR/ranges.npy).
"""

import json
import pathlib
import sys

import numpy as np
import torch
from sentence_transformers import SentenceTransformer
from sentence_transformers.util import quantization

PRECISIONS = ("float32", "int8", "uint8", "binary", "ubinary")
CALIBRATION = 50


def main(texts_path, folder, out):
    torch.set_num_threads(1)
    out = pathlib.Path(out)
    out.mkdir(parents=True, exist_ok=True)
    texts = json.loads(pathlib.Path(texts_path).read_text(encoding="utf-8"))
    model = SentenceTransformer(folder, device="cpu")
    for precision in PRECISIONS:
        np.save(out / f"encode-{precision}.npy", model.encode(texts, batch_size=32, precision=precision))
    floats = np.load(out / "encode-float32.npy")
    for precision in PRECISIONS:
        np.save(out / f"quantize-{precision}.npy", quantization.quantize_embeddings(floats, precision=precision))
    calibration, rest = floats[:CALIBRATION], floats[CALIBRATION:]
    for precision in ("int8", "uint8"):
        codes = quantization.quantize_embeddings(rest, precision=precision, calibration_embeddings=calibration)
        np.save(out / f"calibrated-{precision}.npy", codes)
    np.save(out / "ranges.npy", quantization._get_quantization_ranges(rest, "int8", calibration))


if __name__ == "__main__":
    main(*sys.argv[1:])
