"""Hand-built ops the fused graph runs.

`onednn_layer_norm` (oneDNN's fused LayerNorm), `onednn_matmul` (oneDNN's
bf16 matmul with its weights kept in oneDNN's layout), `onednn_int8`
(oneDNN's int8 matmuls and the `MatmulPolicy` that says how dense layers run),
`activation_quantization` (run-time int8 quantization of activations) and
`int8_quantization` (int8 quantization and calibration of weights).
"""
