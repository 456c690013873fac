"""Peer: fastembed on a local ONNX export of the model, timed (run by `encode_peers.py`).

Usage: fastembed_encode.py --variant fp32|int8 --texts FILE.json --out FILE.npy --work DIR
       [--model DIR] [--passes 3] [--queries FILE.json]

fastembed's own all-MiniLM-L6-v2 is downloaded from the hub, which is not
reachable here, so the model is registered with
`TextEmbedding.add_custom_model` (mean pooling, L2 normalisation, dim 384)
and loaded from the ONNX files that `st_backends.py` exports into
`--work/st_model_onnx/onnx/` (exporting them first when absent): `model.onnx` for
fp32, the dynamic int8 `model_q[u]int8_<config>.onnx` for int8. ONNX Runtime
runs with 2 threads (`threads=2`), batch 32.
"""

import json

import numpy as np
import peer_common
import st_backends
from fastembed import TextEmbedding
from fastembed.common.model_description import ModelSource
from fastembed.common.model_description import PoolingType

ONNX_VARIANT = {"fp32": "onnx_fp32", "int8": "onnx_int8"}


def model_dim(copy):
    with open(copy / "config.json", encoding="utf-8") as f:
        return int(json.load(f)["hidden_size"])


def main():
    args = peer_common.variant_parser(__doc__.splitlines()[0], tuple(ONNX_VARIANT)).parse_args()
    peer_common.setup_torch()  # the ONNX export uses torch
    model_dir = args.model or peer_common.default_model_path()
    copy, file_name = st_backends.prepare_onnx(model_dir, args.work, ONNX_VARIANT[args.variant])

    name = f"local/all-minilm-l6-v2-{args.variant}"
    TextEmbedding.add_custom_model(
        model=name,
        pooling=PoolingType.MEAN,
        normalization=True,
        sources=ModelSource(hf="local/unused"),
        dim=model_dim(copy),
        model_file=file_name,
    )
    model = TextEmbedding(model_name=name, specific_model_path=str(copy), threads=st_backends.ORT_THREADS)

    def encode(texts):
        return np.stack(list(model.embed(texts, batch_size=args.batch_size)))

    peer_common.run_variant(
        args,
        "fastembed",
        encode,
        file_name=file_name,
        ort_threads=st_backends.ORT_THREADS,
        versions=peer_common.package_versions("fastembed", "onnxruntime", "tokenizers"),
    )


if __name__ == "__main__":
    main()
