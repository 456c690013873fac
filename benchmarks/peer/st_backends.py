"""Peer: one sentence-transformers backend variant, timed (run by `encode_peers.py`).

Usage: st_backends.py --variant V --texts FILE.json --out FILE.npy --work DIR [--model DIR]
       [--passes 3] [--queries FILE.json] [--request-batches] [--calibration FILE.json]

Variants (batch 32, `normalize_embeddings=True`; torch 2 threads, ONNX
Runtime 2 intra-op threads, OpenVINO its default, all cores):
  torch                 SentenceTransformer on PyTorch, float32 (the reference);
  onnx_fp32, onnx_o3    backend="onnx": the exported model, and its Optimum O3 graph
                        (`export_optimized_onnx_model`);
  onnx_int8             `export_dynamic_quantized_onnx_model` with the avx512_vnni
                        config on a CPU with AVX512-VNNI, else avx2;
  openvino_fp32, openvino_bf16
                        backend="openvino" with INFERENCE_PRECISION_HINT f32 / bf16;
  openvino_int8_static  nncf.quantize of the exported OpenVINO model, calibrated on
                        --calibration (local text). sentence-transformers' own
                        `export_static_quantized_openvino_model` downloads its
                        calibration set from the Hugging Face hub, which is not
                        reachable here, so nncf is called directly.

The model folder is copied once per backend into `--work/st_model_onnx` and
`--work/st_model_openvino` (the installed package folder stays read only);
exports are written into the copy's `onnx/` or `openvino/` folder and reused
by later variants and by `fastembed_encode.py`.
The ONNX variants need `sentence-transformers[onnx]` (5.7 here), the OpenVINO
ones `sentence-transformers[openvino]` and `nncf`; each venv has only one of
them, so onnxruntime, openvino and nncf are imported where they are used.
"""

import json
import shutil
import sys
from pathlib import Path

import peer_common
from sentence_transformers import SentenceTransformer
from sentence_transformers import export_dynamic_quantized_onnx_model
from sentence_transformers import export_optimized_onnx_model

ONNX_VARIANTS = ("onnx_fp32", "onnx_o3", "onnx_int8")
OPENVINO_HINTS = {"openvino_fp32": "f32", "openvino_bf16": "bf16"}
VARIANTS = ("torch", *ONNX_VARIANTS, *OPENVINO_HINTS, "openvino_int8_static")
ORT_THREADS = 2
OV_INT8_FILE = "openvino/openvino_model_qint8_static.xml"


def log(message):
    print(f"[st_backends] {message}", file=sys.stderr, flush=True)


def work_copy(model_dir, work, backend):
    """`work/st_model_<backend>`: a copy of the model folder that exports may write into.

    One per backend: `save_pretrained` rewrites `modules.json` in the format of
    the sentence-transformers version that runs it, and 5.7 (ONNX venv) cannot
    read the module paths 6.2 (OpenVINO venv) writes.

    Likewise transformers 5 writes `extra_special_tokens` in
    `tokenizer_config.json` as a list, which transformers 4 (ONNX venv) reads
    only as a mapping: in the copy, a list naming tokens the config already
    names (`<s>`, `</s>`) is dropped.
    """
    copy = Path(work) / f"st_model_{backend}"
    if not (copy / "modules.json").is_file():
        shutil.copytree(model_dir, copy, dirs_exist_ok=True)
    config_path = copy / "tokenizer_config.json"
    if config_path.is_file():
        config = json.loads(config_path.read_text())
        extra = config.get("extra_special_tokens")
        if isinstance(extra, list) and set(extra) <= {v for v in config.values() if isinstance(v, str)}:
            del config["extra_special_tokens"]
            config_path.write_text(json.dumps(config, indent=2))
    return copy


def ort_session_options():
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = ORT_THREADS
    options.inter_op_num_threads = 1
    return options


def load_onnx(copy, file_name):
    return SentenceTransformer(
        str(copy),
        device="cpu",
        backend="onnx",
        model_kwargs={"file_name": file_name, "session_options": ort_session_options()},
    )


def int8_config():
    """The `export_dynamic_quantized_onnx_model` config this CPU runs best."""
    return "avx512_vnni" if "avx512_vnni" in peer_common.cpu_flags() else "avx2"


def prepare_onnx(model_dir, work, variant):
    """Exports what `variant` needs (once); returns `(copy, file name in copy)`."""
    copy = work_copy(model_dir, work, "onnx")
    if not (copy / "onnx" / "model.onnx").is_file():
        log("exporting the model to ONNX")
        SentenceTransformer(str(copy), device="cpu", backend="onnx").save_pretrained(str(copy))
    if variant == "onnx_fp32":
        return copy, "onnx/model.onnx"
    if variant == "onnx_o3":
        file_name = "onnx/model_O3.onnx"
        if not (copy / file_name).is_file():
            log("optimising the ONNX model (O3)")
            export_optimized_onnx_model(load_onnx(copy, "onnx/model.onnx"), "O3", str(copy))
        return copy, file_name
    config = int8_config()
    # The file is named after the config's weight type: qint8 (avx512_vnni) or quint8 (avx2).
    found = sorted((copy / "onnx").glob(f"model_q*int8_{config}.onnx"))
    if not found:
        log(f"dynamic int8 quantization of the ONNX model ({config})")
        export_dynamic_quantized_onnx_model(load_onnx(copy, "onnx/model.onnx"), config, str(copy))
        found = sorted((copy / "onnx").glob(f"model_q*int8_{config}.onnx"))
    return copy, f"onnx/{found[0].name}"


def prepare_openvino(model_dir, work, calibration=None):
    """Exports the OpenVINO model (once), and its nncf int8 version when `calibration` is given."""
    copy = work_copy(model_dir, work, "openvino")
    xml = copy / "openvino" / "openvino_model.xml"
    if not xml.is_file():
        log("exporting the model to OpenVINO")
        SentenceTransformer(str(copy), device="cpu", backend="openvino").save_pretrained(str(copy))
    if calibration is None or (copy / OV_INT8_FILE).is_file():
        return copy
    import nncf
    import openvino
    from transformers import AutoTokenizer

    texts = peer_common.read_texts(calibration)
    log(f"nncf static int8 quantization, calibrated on {len(texts)} local sentences")
    model = openvino.Core().read_model(str(xml))
    names = [port.get_any_name() for port in model.inputs]
    tokenizer = AutoTokenizer.from_pretrained(str(copy))

    def transform(text):
        encoded = tokenizer([text], return_tensors="np", truncation=True, max_length=256)
        return {name: encoded[name] for name in names}

    quantized = nncf.quantize(
        model, nncf.Dataset(texts, transform), model_type=nncf.ModelType.TRANSFORMER, subset_size=len(texts)
    )
    openvino.save_model(quantized, str(copy / OV_INT8_FILE), compress_to_fp16=False)
    return copy


def load(args):
    """`(SentenceTransformer, info dict)` for `args.variant`, exporting what it needs first."""
    model_dir = args.model or peer_common.default_model_path()
    variant = args.variant
    if variant == "torch":
        return SentenceTransformer(model_dir, device="cpu"), {"backend": "torch"}
    if variant in ONNX_VARIANTS:
        copy, file_name = prepare_onnx(model_dir, args.work, variant)
        info = {"backend": "onnx", "file_name": file_name, "ort_intra_op_threads": ORT_THREADS}
        if variant == "onnx_int8":
            info["quantization_config"] = int8_config()
        return load_onnx(copy, file_name), info
    if variant in OPENVINO_HINTS:
        copy = prepare_openvino(model_dir, args.work)
        ov_config = {"INFERENCE_PRECISION_HINT": OPENVINO_HINTS[variant]}
        model = SentenceTransformer(
            str(copy),
            device="cpu",
            backend="openvino",
            model_kwargs={"file_name": "openvino/openvino_model.xml", "ov_config": ov_config},
        )
        return model, {"backend": "openvino", "ov_config": ov_config}
    if not args.calibration:
        sys.exit("openvino_int8_static needs --calibration FILE.json")
    copy = prepare_openvino(model_dir, args.work, args.calibration)
    model = SentenceTransformer(str(copy), device="cpu", backend="openvino", model_kwargs={"file_name": OV_INT8_FILE})
    return model, {
        "backend": "openvino",
        "file_name": OV_INT8_FILE,
        "ov_config": "default (INFERENCE_PRECISION_HINT left to OpenVINO)",
        "calibration_texts": len(peer_common.read_texts(args.calibration)),
    }


def main():
    args = peer_common.variant_parser(__doc__.splitlines()[0], VARIANTS).parse_args()
    torch = peer_common.setup_torch()
    model, info = load(args)

    def encode(texts):
        return model.encode(
            texts, batch_size=args.batch_size, normalize_embeddings=True, show_progress_bar=False, convert_to_numpy=True
        )

    peer_common.run_variant(
        args,
        "sentence-transformers",
        encode,
        **info,
        max_seq_length=model.max_seq_length,
        torch_threads=torch.get_num_threads(),
        versions=peer_common.package_versions(
            "sentence-transformers",
            "torch",
            "transformers",
            "optimum",
            "optimum-onnx",
            "optimum-intel",
            "onnxruntime",
            "openvino",
            "nncf",
        ),
    )


if __name__ == "__main__":
    main()
