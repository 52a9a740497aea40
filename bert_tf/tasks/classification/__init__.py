"""Sentence (pair) classification: the task (`task.py`) and the datasets it reads (`glue.py`)."""
