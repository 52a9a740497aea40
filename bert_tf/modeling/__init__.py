"""The model: its config (configs.py: BertConfig, presets), the encoder (encoder.py), the
pretraining heads (heads.py), the pretraining model with its loss (pretrainer.py), the
encoder's chosen layers for feature-based use (feature_extractor.py), and weights from any
source into them (checkpoints.py: ours, google-research/bert's TF1, Hugging Face)."""
