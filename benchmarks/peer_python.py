"""The peer's python: the venv of its own (torch, transformers; benchmarks/README.md says what it
holds) that $BERT_TF_PEER_PYTHON names. No default names a machine's path: with the variable
unset, --peer_python must be given.

Kind: shared by every kind (benchmarks/); imported, never run."""
import argparse
import os

ENV = "BERT_TF_PEER_PYTHON"


def add_flag(parser: argparse.ArgumentParser, required: bool = True) -> None:
  """--peer_python, defaulting to $BERT_TF_PEER_PYTHON; required (unless `required` is False,
  for a script that runs its own side alone without it) when the variable is unset."""
  default = os.environ.get(ENV)
  parser.add_argument("--peer_python", default=default, required=required and not default,
                      help=f"the peer venv's python (default: ${ENV})")
