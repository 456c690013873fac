"""sbert_keras changes no class of Keras, KerasHub or TensorFlow; it counts writes on the encoder's own variables.

The inference engine's staleness tracking (`runtime.weight_writes`) hooks
the writes of the encoder's variables only, as instance attributes: a
user's other models, and Keras' and TensorFlow's classes, stay as they are.
"""

import ast
import copy
import json
import os
import pickle
import subprocess
import sys

import keras
import numpy as np
import tensorflow as tf

from conftest import ROOT
from conftest import tiny_encoder
from sbert_keras.runtime import weight_writes

TEXTS = ["a man is playing guitar", "a dog runs in the park"]
LIBRARY_NAMES = {"keras", "keras_hub", "tf", "tensorflow", "tensorflow_text", "tf_text"}
LIBRARY_PACKAGES = ("keras", "keras_hub", "tensorflow", "tensorflow_text")

# Run in a fresh process: every class of Keras, KerasHub and TensorFlow loaded before `import sbert_keras` is
# compared, attribute by attribute (identity), after building, encoding with, training and exporting an encoder.
SCRIPT = """
import json, sys
import keras, keras_hub, tensorflow as tf
from keras.src.backend.tensorflow.optimizer import TFOptimizer

LIBRARIES = ("keras", "keras_hub", "tensorflow")


def classes():  # every class defined by the libraries, protocol buffers aside (their enum wrappers are lazy)
    found = {}
    for name, module in list(sys.modules.items()):
        if module is None or name.split(".")[0] not in LIBRARIES:
            continue
        for value in list(vars(module).values()):
            module_name = getattr(value, "__module__", "") or ""
            if isinstance(value, type) and module_name.split(".")[0] in LIBRARIES and "_pb2" not in module_name:
                found[id(value)] = (value, dict(vars(value)))
    return found

before = classes()


def methods():
    return {
        "keras.Variable.assign": keras.Variable.assign,
        "keras.Variable.assign_add": keras.Variable.assign_add,
        "keras.Variable.assign_sub": keras.Variable.assign_sub,
        "Optimizer.apply": keras.optimizers.Optimizer.apply,
        "Optimizer.build": keras.optimizers.Optimizer.build,
        "Optimizer.finalize_variable_values": keras.optimizers.Optimizer.finalize_variable_values,
        "TFOptimizer.assign": TFOptimizer.assign,
        "TFOptimizer.apply": TFOptimizer.apply,
        "tf.Variable.assign": tf.Variable.assign,
    }


named = methods()
import numpy as np
import sbert_keras as sk
from conftest import tiny_encoder

encoder = tiny_encoder(table_rows=200)
texts = ["a man is playing guitar", "a dog runs in the park"]
encoder.encode(texts)
encoder.encode(texts[0], precision="float32")
model = sk.RegressionSiamese(encoder)
model.compile(optimizer=keras.optimizers.Adam(0.01, use_ema=True))
model.fit((np.array(texts[:1]), np.array(texts[1:])), np.array([0.5], "float32"), verbose=0)
encoder.encode(texts[0], precision="float32")
sk.export_saved_model(encoder, sys.argv[1], compute="float32")
after = methods()
changed = [name for name in named if after[name] is not named[name]]
missing = object()
for cls, attributes in before.values():
    now = vars(cls)
    for key in set(attributes) | set(now):
        lazy = key in ("__slotnames__", "__annotations__")  # set by Python on first use
        if not lazy and now.get(key, missing) is not attributes.get(key, missing):
            changed.append(f"{cls.__module__}.{cls.__qualname__}.{key}")
print(json.dumps({"classes": len(before), "changed": sorted(set(changed))}))

"""


def test_no_class_of_keras_or_tensorflow_changes(tmp_path):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(ROOT / "tests")]), TF_CPP_MIN_LOG_LEVEL="3")
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path / "export")],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["classes"] > 1000  # Keras, KerasHub and TensorFlow were all inspected
    assert result["changed"] == []


def test_another_keras_model_is_untouched():
    encoder = tiny_encoder()
    encoder.encode(TEXTS)
    assert all(weight_writes.is_hooked(v) for v in encoder.backbone.weights)
    other = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    other.compile(optimizer="adam", loss="mse")
    other.fit(np.ones((4, 3), "float32"), np.zeros((4, 2), "float32"), verbose=0)
    variables = other.weights + other.optimizer.variables
    assert not any(weight_writes.is_hooked(v) for v in variables)
    assert all(type(v.assign).__name__ == "method" and type(v.value.assign).__name__ == "method" for v in variables)
    assert not any(weight_writes.is_hooked(v) for v in encoder.preprocessor.weights + encoder.pooling_layer.weights)


def test_a_copied_variable_counts_nothing_on_its_original():
    variable = keras.Variable(np.zeros((3, 2), "float32"))
    watch = weight_writes.WriteWatch([variable])
    copied = copy.deepcopy(variable)
    copied.assign(np.ones((3, 2), "float32"))
    copied.value.assign_add(np.ones((3, 2), "float32"))
    assert not watch.written()
    np.testing.assert_allclose(variable.numpy(), 0.0)
    np.testing.assert_allclose(copied.numpy(), 2.0)
    assert weight_writes.ledger_of(copied) is None
    assert weight_writes.WriteWatch([copied]).written() is False  # a copy watched on its own gets hooks of its own
    assert weight_writes.ledger_of(copied) not in (None, weight_writes.ledger_of(variable))
    unpickled = pickle.loads(pickle.dumps(variable))
    unpickled.assign(np.ones((3, 2), "float32"))
    assert not watch.written()
    variable.assign_add(np.ones((3, 2), "float32"))
    assert watch.written()


def test_a_hooked_encoder_saves_loads_and_clones(tmp_path):
    encoder = tiny_encoder()
    expected = encoder.encode(TEXTS)
    assert weight_writes.is_hooked(encoder.backbone.token_embedding.embeddings)
    encoder.save(tmp_path / "encoder.keras")
    loaded = keras.saving.load_model(tmp_path / "encoder.keras")
    np.testing.assert_allclose(loaded.encode(TEXTS), expected, atol=1e-6)
    backbone = type(encoder.backbone).from_config(encoder.backbone.get_config())
    clone = type(encoder)(
        backbone, encoder.preprocessor, name=encoder.name
    )  # the tokenizer's vocabulary is an asset, not config
    clone.set_weights(encoder.get_weights())
    assert clone.get_config() == encoder.get_config()
    np.testing.assert_allclose(clone.encode(TEXTS), expected, atol=1e-6)
    table = loaded.backbone.token_embedding.embeddings
    assert weight_writes.ledger_of(table) is not weight_writes.ledger_of(encoder.backbone.token_embedding.embeddings)
    table.assign(-table.numpy())  # the copy's writes reach the copy's cached weights, not the original's
    assert np.abs(loaded.encode(TEXTS) - expected).max() > 1e-3
    np.testing.assert_allclose(encoder.encode(TEXTS), expected, atol=1e-6)


def test_traced_writes_count_once_per_run_of_the_graph():
    variable = keras.Variable(np.zeros(4, "float32"))
    watch = weight_writes.WriteWatch([variable])
    (ledger,) = watch.ledgers

    def subtract():
        variable.value.assign_sub(tf.ones(4))
        return tf.constant(1)

    @tf.function
    def step(rows):
        variable.assign_add(tf.ones(4))
        variable.value.scatter_add(tf.IndexedSlices(tf.ones([1]), rows))
        return tf.cond(rows[0] > 0, subtract, lambda: tf.constant(0))

    step(tf.constant([0]))
    step(tf.constant([1]))
    assert ledger.eager == 0 and int(ledger.counter.numpy()) == 3  # two runs of the graph, one taken branch
    np.testing.assert_allclose(variable.numpy(), [2.0, 2.0, 1.0, 1.0])
    assert watch.written()


def library_names(tree):
    """Names that stand for Keras, KerasHub or TensorFlow objects: the modules, what is imported from them."""
    names = set(LIBRARY_NAMES)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in LIBRARY_PACKAGES:
            names |= {alias.asname or alias.name for alias in node.names}
        elif isinstance(node, ast.Import):
            names |= {
                alias.asname or alias.name.split(".")[0]
                for alias in node.names
                if alias.name.split(".")[0] in LIBRARY_PACKAGES
            }
    return names


def chain_root(node):
    """The name at the root of `a.b.c` (None if the chain holds anything but names and attributes)."""
    while isinstance(node, ast.Attribute):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def class_patches(source, filename="<source>"):
    """Lines of `source` that set or delete an attribute of a Keras, KerasHub or TensorFlow object.

    Caught: `keras.Variable.assign = f`, `setattr(keras.optimizers.Optimizer, "apply", f)`,
    `cls = keras.Variable` then `cls.assign = f`, `type(x).attr = f`. An attribute of an instance
    (`layer.trainable = False`, `setattr(variable, "assign", hook)`) is not a class attribute.
    """
    tree = ast.parse(source)
    library = library_names(tree)
    for _ in range(3):  # names bound to library objects, not to call results: `cls = keras.Variable`
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    pairs = [(target, node.value)]
                    if isinstance(target, ast.Tuple) and isinstance(node.value, ast.Tuple):
                        pairs = list(zip(target.elts, node.value.elts))
                    for name, value in pairs:
                        if isinstance(name, ast.Name) and chain_root(value) in library:
                            library.add(name.id)

    def library_object(node):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "type":
            return True
        return chain_root(node) in library

    found = []
    for node in ast.walk(tree):
        targets = []
        if isinstance(node, (ast.Assign, ast.Delete)):
            targets = node.targets
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("setattr", "delattr"):
            if node.args and library_object(node.args[0]):
                found.append(f"{filename}:{node.lineno}")
        for target in targets:
            for item in target.elts if isinstance(target, ast.Tuple) else [target]:
                if isinstance(item, ast.Attribute) and library_object(item.value):
                    found.append(f"{filename}:{node.lineno}")
    return found


def test_no_module_outside_compat_sets_a_library_attribute():
    package = ROOT / "sbert_keras"
    found = []
    for path in sorted(package.rglob("*.py")):
        if path.relative_to(package).parts[0] != "compat":
            found += class_patches(path.read_text(encoding="utf-8"), str(path.relative_to(ROOT)))
    assert found == []


def test_the_static_check_finds_each_kind_of_patch():
    patches = [
        "keras.Variable.assign = f",
        "setattr(keras.optimizers.Optimizer, 'apply', f)",
        "import tensorflow\ntensorflow.Variable.assign = f",
        "from keras.optimizers import Optimizer\nOptimizer.build = f",
        "variable_class = keras.Variable\nvariable_class.assign = f",
        "a, b = keras.Variable, keras.optimizers.Optimizer\nb.apply = f",
        "type(variable).assign = f",
        "del tf.Variable.assign",
    ]
    for source in patches:
        assert class_patches(source), source
    allowed = [
        "layer = keras.layers.Dense(2)\nlayer.trainable = False",
        "setattr(variable, 'assign', hook)",
        "self.backbone = backbone",
        "encoder.preprocessor.sequence_length = 4",
    ]
    for source in allowed:
        assert not class_patches(source), source
