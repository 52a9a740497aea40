"""Where the benchmarks write what they make (data they prepare, runs, exports): the folder that
$BERT_TF_SCRATCH names, else this machine's temporary folder (tempfile.gettempdir()). The
scripts' defaults meet there: squad_data.py's output is runs/squad.py's input, and so on.

Kind: shared by every kind (benchmarks/); imported, never run. Standard library only: the
peers' venvs import it too."""
import os
import tempfile

ENV = "BERT_TF_SCRATCH"


def path(*parts: str) -> str:
  """$BERT_TF_SCRATCH/<parts>, or <the temporary folder>/<parts>."""
  return os.path.join(os.environ.get(ENV) or tempfile.gettempdir(), *parts)
