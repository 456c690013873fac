"""GradCache's three passes on JAX and PyTorch (`cached_siamese` has the TensorFlow ones).

The passes are those of `cached_siamese` (embed in mini-batches without
gradients; the loss's gradient with respect to the embeddings; each
mini-batch again, chained with its slice of that gradient), written the
way Keras' own trainers compute gradients on each backend
(`keras/src/backend/{jax,torch}/trainer.py`):

- JAX is stateless: the encoder runs through `stateless_call` on the
  values of its variables, pass 2 is `jax.value_and_grad` of the loss over
  the embeddings and the weights, and pass 3 is `jax.vjp` of each
  mini-batch's embeddings. Pass 3 starts from the non-trainable values
  pass 1 started from (the dropout seeds), so it replays pass 1's masks
  exactly: with no state outside the variables there is nothing else that
  could differ.
- PyTorch is autograd: pass 1 runs under `torch.no_grad()`, pass 2 calls
  `.backward()` on the loss from leaf embeddings, and pass 3 calls
  `.backward(cached_slice)` on each mini-batch's embeddings, which adds its
  share to every weight's `.grad`. The seeds are restored before pass 3
  and pass 3's embeddings are compared with pass 1's, as on TensorFlow.

Shapes are known on both backends, so the mini-batch loops are Python
loops over static slices.

Example:
```python
loss, y_pred, gradients = torch_cached_gradients(model, x, y, None)
```
"""

import keras
from keras import ops

# Pass 3 recomputes pass 1's embeddings; they must agree up to kernel round-off.
REPLAY_TOLERANCE = 1e-3


def role_features(model, x):
    """`{role: {name: tensor}}` of the tokenised batch `x` (`{f"{role}_{name}": tensor}`)."""
    names = list(model.encoder.input)
    return {role: {name: x[f"{role}_{name}"] for name in names} for role in model.active_roles}


def slices(features, size):
    """`[(start, stop, mini_batch)]`: the `size`-row mini-batches of a role's features, in order."""
    batch = int(ops.shape(next(iter(features.values())))[0])
    return [
        (start, min(start + size, batch), {k: v[start : start + size] for k, v in features.items()})
        for start in range(0, batch, size)
    ]


def replay_error(role):
    """The error of a second pass whose embeddings differ from the first's."""
    return ValueError(
        f"CachedContrastiveSiamese: the second pass over the {role!r} mini-batches gave other embeddings than "
        "the first, so the cached gradients do not apply. The encoder has randomness outside Keras "
        "`SeedGenerator`s (or state outside its non-trainable variables); train it with `ContrastiveSiamese` instead."
    )


def torch_cached_gradients(model, x, y, sample_weight):
    """PyTorch: `(loss, y_pred, gradients)` of `model`'s compiled loss by GradCache (see the module docstring).

    Args:
        model: a compiled `CachedContrastiveSiamese`.
        x: the tokenised batch; y, sample_weight: as `fit` gives them.
    """
    import torch

    features, size = role_features(model, x), model.mini_batch_size
    state = model.encoder.non_trainable_variables
    saved = [ops.copy(v.value) for v in state]
    with torch.no_grad():  # pass 1
        embeddings = {
            role: ops.concatenate([model._encode(part) for _, _, part in slices(f, size)], axis=0)
            for role, f in features.items()
        }
    leaves = {role: e.detach().requires_grad_(True) for role, e in embeddings.items()}
    model.zero_grad()
    y_pred = model._outputs_from_embeddings(leaves)  # pass 2
    loss = model.compute_loss(x=x, y=y, y_pred=y_pred, sample_weight=sample_weight, training=True)
    scaled = loss if model.optimizer is None else model.optimizer.scale_loss(loss)
    scaled.backward()  # also a head weight's direct part, into its `.grad`
    for variable, value in zip(state, saved, strict=True):
        variable.assign(value)
    for role, f in features.items():  # pass 3
        cached, first = leaves[role].grad, embeddings[role]
        for start, stop, part in slices(f, size):
            recomputed = model._encode(part)
            error = float(ops.max(ops.abs(recomputed.detach() - first[start:stop])))
            if error > REPLAY_TOLERANCE * (float(ops.max(ops.abs(first))) + 1e-6):
                raise replay_error(role)
            recomputed.backward(cached[start:stop])
    gradients = [
        ops.zeros(v.shape, "float32") if v.value.grad is None else ops.cast(v.value.grad, "float32")
        for v in model.trainable_weights
    ]
    return loss, y_pred, gradients


def jax_cached_gradients(model, state, x, y, sample_weight):
    """JAX: `(loss, y_pred, gradients, non_trainable, metrics)` by GradCache, from `state`'s values.

    Args:
        model: a compiled `CachedContrastiveSiamese`.
        state: `(trainable, non_trainable, optimizer, metrics)` values, as Keras' JAX `train_step` gets it.
        x: the tokenised batch; y, sample_weight: as `fit` gives them.
    """
    import jax

    trainable, non_trainable, optimizer_variables, metrics = state
    encoder, size = model.encoder, model.mini_batch_size
    t_at = {id(v): i for i, v in enumerate(model.trainable_variables)}
    n_at = {id(v): i for i, v in enumerate(model.non_trainable_variables)}
    enc_t = [t_at[id(v)] for v in encoder.trainable_variables]
    enc_n = [n_at[id(v)] for v in encoder.non_trainable_variables]

    def encode(weights, seeds, part):
        out, seeds = encoder.stateless_call(weights, seeds, part, training=True)
        return ops.cast(out, "float32"), seeds

    features = role_features(model, x)
    first_seeds = seeds = [non_trainable[i] for i in enc_n]
    weights = [trainable[i] for i in enc_t]
    embeddings = {}
    for role, f in features.items():  # pass 1
        parts = []
        for _, _, part in slices(f, size):
            out, seeds = encode(weights, seeds, part)
            parts.append(jax.lax.stop_gradient(out))
        embeddings[role] = ops.concatenate(parts, axis=0)
    non_trainable = list(non_trainable)
    for i, value in zip(enc_n, seeds, strict=True):
        non_trainable[i] = value

    def batch_loss(embeddings, trainable):  # pass 2
        mapping = list(zip(model.trainable_variables, trainable, strict=True))
        mapping += list(zip(model.non_trainable_variables, non_trainable, strict=True))
        with keras.StatelessScope(state_mapping=mapping):
            y_pred = model._outputs_from_embeddings(embeddings)
        loss, (_, _, new_metrics) = model.stateless_compute_loss(
            trainable, non_trainable, metrics, x=x, y=y, y_pred=y_pred, sample_weight=sample_weight, training=True
        )
        scaled = loss
        if model.optimizer is not None:
            with keras.StatelessScope(state_mapping=list(zip(model.optimizer.variables, optimizer_variables))):
                scaled = model.optimizer.scale_loss(loss)
        return scaled, (loss, y_pred, new_metrics)

    (_, (loss, y_pred, metrics)), (cached, gradients) = jax.value_and_grad(batch_loss, argnums=(0, 1), has_aux=True)(
        embeddings, list(trainable)
    )
    gradients = [ops.cast(g, "float32") for g in gradients]
    seeds = first_seeds
    for role, f in features.items():  # pass 3: the same calls from the same seeds
        for start, stop, part in slices(f, size):
            _, pullback, seeds = jax.vjp(lambda w, p=part, s=seeds: encode(w, s, p), weights, has_aux=True)
            (chained,) = pullback(cached[role][start:stop])
            for i, g in zip(enc_t, chained, strict=True):
                gradients[i] = gradients[i] + ops.cast(g, "float32")
    return loss, y_pred, gradients, non_trainable, metrics
