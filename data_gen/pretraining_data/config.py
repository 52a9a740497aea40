"""The pretraining data job's settings: google-research/bert's flags, plus the masking split."""
import dataclasses

from bert_tf.common import json_config
from data_gen.jobs import languages
from tfrecords.masked_lm import MaskingRules


# Position embeddings of every released BERT: a longer sequence cannot be embedded.
MAX_POSITIONS = 512


@dataclasses.dataclass(frozen=True)
class PretrainingDataConfig(json_config.JsonConfig):
  """What `create_pretraining_data` makes of the corpus; field names are the flags'.

  mask_token_prob and random_token_prob split the chosen positions (the paper's Table 8
  ablation): that share becomes [MASK], that share a random vocabulary token, the rest stay
  unchanged. The defaults are the paper's 80/10/10.

  dynamic_masking: write the pairs unmasked (`tfrecords.schema.unmasked_pretraining_features`),
  for run_pretraining --dynamic_masking to mask as it reads them; the masking fields then
  belong to that run, not to this job.

  language_smoothing: S of multilingual.md's smoothed sampling, for a corpus given by language
  (`jobs.languages`); 1 keeps the corpus's shares.
  """
  max_seq_length: int = 128
  max_predictions_per_seq: int = 20
  random_seed: int = 12345
  dupe_factor: int = 10
  masked_lm_prob: float = 0.15
  short_seq_prob: float = 0.1
  do_whole_word_mask: bool = False
  mask_token_prob: float = 0.8
  random_token_prob: float = 0.1
  dynamic_masking: bool = False
  language_smoothing: float = 1.0

  def __post_init__(self):
    """Raises ValueError naming the offending flag."""
    # [CLS] A [SEP] B [SEP] with at least 2 tokens of A and B together.
    if not 5 <= self.max_seq_length <= MAX_POSITIONS:
      raise ValueError(f"--max_seq_length={self.max_seq_length}: must be in [5, {MAX_POSITIONS}] "
                       f"(BERT has {MAX_POSITIONS} position embeddings)")
    if self.random_seed < 0:
      raise ValueError(f"--random_seed={self.random_seed}: must be >= 0")
    if self.dupe_factor < 1:
      raise ValueError(f"--dupe_factor={self.dupe_factor}: must be >= 1")
    if not 0 <= self.short_seq_prob <= 1:
      raise ValueError(f"--short_seq_prob={self.short_seq_prob}: must be in [0, 1]")
    languages.check_smoothing(self.language_smoothing)
    self.masking_rules()  # Their checks.

  def masking_rules(self) -> MaskingRules:
    return MaskingRules(self.max_predictions_per_seq, self.masked_lm_prob,
                        self.do_whole_word_mask, self.mask_token_prob, self.random_token_prob)
