"""Training: the loop every job runs (loop.py: steps inside tf.function, checkpoints, resume,
evaluation), its optimizers (optimization.py), where it runs (distribute.py), and pretraining as
a library call (pretraining.py) with its masked-LM targets drawn on the fly
(dynamic_masking.py)."""
