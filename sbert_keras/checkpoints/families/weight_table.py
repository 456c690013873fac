"""One table per model family: Hugging Face tensors <-> Keras variables, both ways.

A family's table is a list of `WeightRule`s, built from the backbone's
sizes alone. Each rule names the Hugging Face tensor(s) with their shapes,
where the Keras variable sits in a built backbone (a function of the
backbone), and the transform between the two layouts. The same rules serve
three jobs, so loading and saving cannot drift apart:

- `expected_shapes(rules)`: the tensors a `model.safetensors` must hold, for
  the header check that runs before anything is built or read;
- `assign_from_tensors(rules, backbone, tensors)`: loading (`from_preset`);
- `tensors_from_variables(rules, backbone)`: saving
  (`save_to_sentence_transformers`).

Transforms (`COPY`, `LINEAR`, `Positions`, `ZEROS`) each know both
directions. `LINEAR` turns a `torch.nn.Linear` weight `[out, in]` into a
Keras kernel `[in, out]` reshaped to the variable's shape (KerasHub's
attention kernels are `[hidden, heads, head_dim]` and `[heads, head_dim,
hidden]`), and back. `Positions` drops the rows a model reserves before its
first position (RoBERTa, XLM-R, MPNet: 2) and folds the token-type row 0
into the position table (a sentence encoder only sees segment 0); saving
writes those reserved rows and the token types as zeros, which loads back to
the same table. `ZEROS` marks tensors a Hugging Face model has but a sentence
encoder does not use (the pooler): never read, written as zeros so that
`transformers.AutoModel` finds every weight it expects.

Example:
```python
rules = family.weight_table(arguments)
assign_from_tensors(rules, backbone, load_file("model.safetensors"), "model.safetensors")
tensors = tensors_from_variables(rules, backbone)  # {hf_key: np.ndarray}
```
"""

import dataclasses

import numpy as np


class Copy:
    """The tensor is the variable, reshaped."""

    def to_keras(self, arrays, shape):
        return arrays[0].reshape(shape)

    def to_hf(self, value, shapes):
        return [value.reshape(shapes[0])]


class Linear:
    """A `torch.nn.Linear` weight `[out, in]` <-> a Keras kernel `[in, ..., out]`."""

    def to_keras(self, arrays, shape):
        return arrays[0].T.reshape(shape)

    def to_hf(self, value, shapes):
        out_dim, in_dim = shapes[0]
        return [value.reshape(in_dim, out_dim).T]


class Zeros:
    """Tensors the sentence encoder does not use: not read; written as zeros."""

    def to_keras(self, arrays, shape):
        raise TypeError("ZEROS tensors have no Keras variable.")

    def to_hf(self, value, shapes):
        return [np.zeros(shape, "float32") for shape in shapes]


@dataclasses.dataclass(frozen=True)
class Positions:
    """Position rows after `offset`, plus the token-type row 0 when the table has one.

    Args:
        offset: int. Rows reserved before the first position (RoBERTa: 2).
    """

    offset: int = 0

    def to_keras(self, arrays, shape):
        positions = arrays[0][self.offset : self.offset + shape[0]]
        if len(arrays) > 1 and arrays[1] is not None:
            positions = positions + arrays[1][0]
        return positions

    def to_hf(self, value, shapes):
        reserved = np.zeros((self.offset, value.shape[1]), value.dtype)
        tables = [np.concatenate([reserved, value])]
        return tables + [np.zeros(shape, value.dtype) for shape in shapes[1:]]


COPY = Copy()
LINEAR = Linear()
ZEROS = Zeros()


@dataclasses.dataclass(frozen=True)
class WeightRule:
    """One Keras variable and the Hugging Face tensors it is made of.

    Args:
        keys: tuple of `(tensor name, shape)`: the Hugging Face tensors, as
            named without a model prefix.
        variable: callable `backbone -> Keras variable`, or `None` (`ZEROS`).
        transform: `COPY`, `LINEAR`, `Positions(...)` or `ZEROS`.
        optional: tensor names that may be absent when loading (the
            token-type table); the transform then receives `None`.
    """

    keys: tuple
    variable: object
    transform: object = COPY
    optional: frozenset = frozenset()


def rule(key, shape, variable, transform=COPY):
    """A rule of one tensor."""
    return WeightRule(((key, tuple(shape)),), variable, transform)


def expected_shapes(rules):
    """`{tensor: shape}` that loading reads (optional and `ZEROS` tensors left out)."""
    return {key: shape for r in rules if r.transform is not ZEROS for key, shape in r.keys if key not in r.optional}


def assign_from_tensors(rules, backbone, tensors, source="model.safetensors"):
    """Assigns Hugging Face `tensors` (prefix stripped) to each rule's variable of `backbone`.

    Raises:
        KeyError: a required tensor is missing; `source` and the tensor are named.
    """
    for r in rules:
        if r.transform is ZEROS:
            continue
        arrays = []
        for key, _ in r.keys:
            if key not in tensors and key not in r.optional:
                raise KeyError(f"{source}: missing tensor {key!r}.")
            arrays.append(tensors.get(key))
        variable = r.variable(backbone)
        variable.assign(r.transform.to_keras(arrays, tuple(variable.shape)))


def tensors_from_variables(rules, backbone):
    """`{tensor: float32 array}` in Hugging Face's layout, from each rule's variable of `backbone`."""
    tensors = {}
    for r in rules:
        value = None if r.variable is None else np.asarray(keras_value(r.variable(backbone)), "float32")
        shapes = [shape for _, shape in r.keys]
        for (key, _), array in zip(r.keys, r.transform.to_hf(value, shapes)):
            tensors[key] = np.ascontiguousarray(array, dtype="float32")
    return tensors


def keras_value(variable):
    """A variable's value as NumPy (float32 for a float variable)."""
    return np.asarray(variable.numpy() if hasattr(variable, "numpy") else variable)


def attribute(path):
    """A variable getter for a dotted attribute path (`"embeddings.position_embedding.position_embeddings"`)."""

    def get(backbone):
        value = backbone
        for name in path.split("."):
            value = value[int(name)] if name.isdigit() else getattr(value, name)
        return value

    return get
