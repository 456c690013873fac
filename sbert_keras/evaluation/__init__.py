"""Evaluators (dicts of named metrics with one primary) and the Keras callback that runs them during `fit`.

`evaluators` holds STS, triplet, NLI and transfer evaluation and
`EvaluationCallback`; `pair_evaluation` binary classification and
paraphrase mining; `retrieval_evaluation` information retrieval and BEIR
folders.
"""
