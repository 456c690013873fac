"""Scale-out through engines made for it: Apache Beam `RunInference` for corpus encoding."""
