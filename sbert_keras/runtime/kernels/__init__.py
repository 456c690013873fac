"""Hand-built ops: oneDNN's fused LayerNorm and int8 matmuls, and int8 quantization of weights."""
