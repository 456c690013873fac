"""Plain building blocks every layer uses; imports nothing from the rest of the package.

`defaults` (every default value, in one place), `checks` (argument
checks that name the bad input), `console` (logging and progress bars),
`checksums` (the one SHA-256 of a file), `atomic_io` and `disk_space` (outputs written whole or not at all),
`output_lock` (one writer per output folder), `model_files` (the one
reader of a model folder's JSON files), `hardware` (CPU flags, GPU, the
precision `"auto"` picks), `arrays` (NumPy row normalisation),
`memory` (a large job's freed heap handed back to the system),
`import_hooks` (a function run right after, or around, another
library's import),
`backends` (which Keras backend runs, whether TensorFlow is installed,
and TensorFlow imported only when a TensorFlow feature uses it),
`tf_startup` (what is set up when sbert_keras imports TensorFlow: its
start-up lines held, XLA's disk cache) and `output_names` (the names of
what the package writes, and what an overwrite replaces).
"""
