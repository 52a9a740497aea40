"""What a pretraining record's masked-LM fields (`schema.pretraining_features`) hold: the rules
that draw them, which the offline masker (`data_gen`, google-research/bert's
create_pretraining_data) and the dynamic one (`bert_tf.training.dynamic_masking`) both follow;
the flags' names, meanings and checks, once. No TensorFlow (data_gen's workers import it)."""
import dataclasses


@dataclasses.dataclass(frozen=True)
class MaskingRules:
  """create_pretraining_data's masking flags, same names and meanings: up to
  max_predictions_per_seq positions, masked_lm_prob of the tokens, whole words or pieces; of
  the chosen, mask_token_prob become [MASK], random_token_prob a random token, the rest stay
  (the paper's 80/10/10 by default; its Table 8 ablation otherwise).

  ValueError naming the flag for a value out of range."""
  max_predictions_per_seq: int = 20
  masked_lm_prob: float = 0.15
  do_whole_word_mask: bool = False
  mask_token_prob: float = 0.8
  random_token_prob: float = 0.1

  def __post_init__(self):
    if self.max_predictions_per_seq < 1:
      raise ValueError(f"--max_predictions_per_seq={self.max_predictions_per_seq}: must be >= 1")
    if not 0 < self.masked_lm_prob <= 1:
      raise ValueError(f"--masked_lm_prob={self.masked_lm_prob}: must be in (0, 1]")
    for name in ("mask_token_prob", "random_token_prob"):
      if not 0 <= getattr(self, name) <= 1:
        raise ValueError(f"--{name}={getattr(self, name)}: must be in [0, 1]")
    if self.mask_token_prob + self.random_token_prob > 1:
      raise ValueError(f"--mask_token_prob={self.mask_token_prob} plus --random_token_prob="
                       f"{self.random_token_prob} exceeds 1")
