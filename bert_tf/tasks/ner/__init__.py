"""Named entity recognition: the task, fine-tuned and feature-based (`task.py`), and its serving
graph (`serving.py`)."""
