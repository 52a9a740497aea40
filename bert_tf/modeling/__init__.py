"""The models: the encoder (encoder.py), the pretraining heads (heads.py) and the pretraining
model with its loss (pretrainer.py)."""
