"""SQuAD question answering: the task (`task.py`), its serving graph (`serving.py`) and the
official scores (`scoring.py`, which loads no TensorFlow: `squad_evaluate` imports only it)."""
