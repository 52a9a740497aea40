"""The benchmarks, by kind (never part of `make test`; their measurements: README.md here):

  runs/    our product's timed and quality runs (one task, one entry point, one job each)
  peers/   the peer's side of a comparison (Hugging Face transformers on PyTorch, in a venv of
           its own) and the drivers that run both sides
  parity/  checks that two implementations give the same numbers: ours against a reference
           (google-research/bert, the Model Garden, transformers), an export against its model

Shared by every kind: data_root.py (the data root, $BERT_TF_DATA), recipes.py (the named
recipes both sides read) and squad_data.py (the SQuAD splits both sides train on).

Run a benchmark as a file from the repository root, with the root on the path:
  PYTHONPATH=. .venv/bin/python benchmarks/<kind>/<script>.py --help
"""
