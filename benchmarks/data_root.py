"""Where the benchmarks' real data is: the folder that $BERT_TF_DATA names (the GLUE, SQuAD
and CoNLL files; this project's sessions keep them in ../shared/data). No default names a
machine's path: with the variable unset, a data flag must be given.

Kind: shared by every kind (benchmarks/); imported, never run."""
import os

ENV = "BERT_TF_DATA"


def path(*parts: str) -> str | None:
  """$BERT_TF_DATA/<parts>, or None when the variable is unset."""
  root = os.environ.get(ENV)
  return os.path.join(root, *parts) if root else None

