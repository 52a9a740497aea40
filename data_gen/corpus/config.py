"""prepare_corpus's settings (what its output depends on), checked before any work starts."""
import dataclasses
import re

from bert_tf.common import json_config
from data_gen.corpus import sentences

SOURCES = ("auto", "wikipedia", "wikiextractor", "books", "paragraphs")
# A language code as Wikipedia's dumps give it (xml:lang): ISO 639 and subtags (de, zh-yue).
LANGUAGE_CODE = re.compile(r"[a-z]{2,3}(?:-[a-z0-9]{1,8})*")


@dataclasses.dataclass(frozen=True)
class CorpusConfig(json_config.JsonConfig):
  """What `prepare_corpus` makes of its sources; field names are the flags'.

  source:             the input's kind, or "auto": detected per file (`sources.detect`).
  language:           the text's language code (de, zh); None: the first Wikipedia dump's
                      <siteinfo> says (xml:lang, else its dbname), "en" without one. The
                      pipeline resolves it before any unit is cleaned: workers see a code.
  sentence_splitter:  a name of `sentences`' registry.
  num_output_shards:  the training shards (None: the --output_file itself, one file).
  holdout_fraction:   the share of documents (by a hash of their identity) held out for
                      evaluation, written to `num_holdout_shards` shards of their own.
  min_sentences, min_words: a document with fewer is dropped (one sentence gives no
                      next-sentence pair).
  dedup:              drop a document whose text another before it has, exactly.
  page_time_limit:    CPU seconds one Wikipedia page may take to parse and clean; a page that
                      takes longer is skipped and counted (0: no limit).
  """
  source: str = "auto"
  language: str | None = None
  sentence_splitter: str = sentences.DEFAULT
  num_output_shards: int | None = None
  holdout_fraction: float = 0.0
  num_holdout_shards: int = 1
  min_sentences: int = 1
  min_words: int = 0
  dedup: bool = False
  page_time_limit: float = 60.0

  def __post_init__(self):
    """Raises ValueError naming the offending flag."""
    if self.source not in SOURCES:
      raise ValueError(f"--source={self.source}: must be one of {', '.join(SOURCES)}")
    if self.language is not None and not LANGUAGE_CODE.fullmatch(self.language):
      raise ValueError(f"--language={self.language}: not a language code (en, de, zh, "
                       "zh-yue: lower case, as Wikipedia's dumps name them)")
    if self.sentence_splitter not in sentences.NAMES:
      raise ValueError(f"--sentence_splitter={self.sentence_splitter}: must be one of "
                       f"{', '.join(sentences.NAMES)}")
    if self.num_output_shards is not None and self.num_output_shards < 1:
      raise ValueError(f"--num_output_shards={self.num_output_shards}: must be >= 1")
    if not 0 <= self.holdout_fraction < 1:
      raise ValueError(f"--holdout_fraction={self.holdout_fraction}: must be in [0, 1)")
    if self.num_holdout_shards < 1:
      raise ValueError(f"--num_holdout_shards={self.num_holdout_shards}: must be >= 1")
    if self.min_sentences < 1:
      raise ValueError(f"--min_sentences={self.min_sentences}: must be >= 1")
    if self.min_words < 0:
      raise ValueError(f"--min_words={self.min_words}: must be >= 0")
    if self.page_time_limit < 0:
      raise ValueError(f"--page_time_limit={self.page_time_limit}: must be >= 0 (0: none)")
