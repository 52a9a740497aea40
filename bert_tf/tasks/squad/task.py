"""SQuAD v1.1 and v2.0 question answering: google-research/bert's run_squad.py as a task.

  examples     a SQuAD JSON file -> one `SquadExample` per question: the passage split at
               whitespace into words, a training answer as its first and last word
  features     [CLS] question [SEP] passage window [SEP]: windows of the passage's wordpieces
               every doc_stride pieces; a piece belongs to the window where it has the most
               context on its shorter side
  model        the Model Garden's BertSpanLabeler: sequence output -> dense -> start and end
               logits [batch, seq]
  loss         mean softmax cross-entropy of the start and of the end position
  predictions  the n_best_size best starts x ends of each window, spans checked and ranked
               over the question's windows, mapped back to the passage's characters; v2.0
               answers "" when [CLS]'s score beats the best span by null_score_diff_threshold
  files        predictions.json, nbest_predictions.json, null_odds.json (v2.0)

Features and predictions equal the Model Garden's `official.nlp.data.squad_lib` (the
original's, ported) for the same tokenizer and logits (tests/test_squad.py,
benchmarks/squad_features_parity.py); tokenization runs in large batches through
`bert_tf.tokenization` and the span search in numpy, so the SQuAD dev set converts and
post-processes in seconds.
"""
import bisect
import dataclasses
import itertools
import json
import math
import os
from typing import ClassVar

from absl import logging
import numpy as np
import tensorflow as tf
import tf_keras
from official.nlp.modeling.models import BertSpanLabeler

from bert_tf.common.errors import DataError
from bert_tf.common.files import write_text
from bert_tf.modeling.configs import BertConfig
from bert_tf.modeling.encoder import build_encoder, create_variables, initializer
from bert_tf.tasks.squad import scoring
from bert_tf.finetuning import register
from bert_tf.finetuning import losses
from bert_tf.finetuning.distillation import SoftTarget
from bert_tf.finetuning import text_files
from bert_tf.finetuning.task import Features, FineTuningTask, TaskConfig
from bert_tf.tokenization import FullTokenizer, split_words
from tfrecords import schema

# The original's first unique id; each feature (passage window) takes the next.
FIRST_UNIQUE_ID = 1000000000
# The original's passage whitespace (U+202F NARROW NO-BREAK SPACE included).
WHITESPACE = frozenset(" \t\r\n\u202f")

SAMPLE_REQUESTS = (
    {"question": "Who wrote the BERT paper?",
     "context": "The BERT paper was written by Jacob Devlin and colleagues at Google."},
    {"question": "What does the encoder read?",
     "context": "BERT is pre-trained on unlabeled text. Its Transformer encoder reads the whole "
                "sequence at once, so every token sees the tokens to its left and to its right. "
                "Fine-tuning adds one output layer for the task at hand."},
    {"question": "", "context": ""},
)


@dataclasses.dataclass
class SquadConfig(TaskConfig):
  """run_squad.py's flags of the same names."""
  kind: ClassVar[str] = "squad"
  max_seq_length: int = 384
  do_lower_case: bool = True
  doc_stride: int = 128
  max_query_length: int = 64
  n_best_size: int = 20
  max_answer_length: int = 30
  version_2_with_negative: bool = False
  null_score_diff_threshold: float = 0.0

  def __post_init__(self):
    for name in ("max_seq_length", "max_query_length", "doc_stride", "n_best_size",
                 "max_answer_length"):
      if getattr(self, name) < 1:
        raise ValueError(f"--{name}={getattr(self, name)}: must be at least 1")
    # [CLS] question [SEP] passage [SEP]: what the longest question leaves of the window.
    room = self.max_seq_length - self.max_query_length - 3
    if room < 1:
      raise ValueError(f"--max_query_length={self.max_query_length} leaves no room for the "
                       f"passage in --max_seq_length={self.max_seq_length} (3 special tokens)")
    if self.doc_stride > room:
      raise ValueError(f"--doc_stride={self.doc_stride} is larger than the passage window, "
                       f"--max_seq_length - --max_query_length - 3 = {room}")


@dataclasses.dataclass
class SquadExample:
  """One question on a passage, as the original's.

  doc_tokens: the passage split at whitespace (shared by the passage's questions).
  start_position, end_position: the training answer's first and last word in doc_tokens
    (-1 for an impossible question); None outside training.
  """
  qas_id: str
  question_text: str
  context: str
  doc_tokens: list[str]
  orig_answer_text: str | None = None
  start_position: int | None = None
  end_position: int | None = None
  is_impossible: bool = False


@dataclasses.dataclass
class SquadFeature:
  """What post-processing needs of a feature (one passage window) beyond its record.

  The window's passage pieces sit at positions doc_offset ... doc_offset + len(tokens) - 1
  (doc_offset = len(question pieces) + 2, after [CLS] question [SEP]).
    tokens: [window] the pieces' strings.
    token_to_orig: int [window] the word of SquadExample.doc_tokens each piece is part of.
    token_is_max_context: bool [window] whether this window gives the piece the most context.
  """
  doc_span_index: int
  doc_offset: int
  tokens: list[str]
  token_to_orig: np.ndarray
  token_is_max_context: np.ndarray


@dataclasses.dataclass
class SquadPredictions:
  """Per question id: the answer, the original's n-best list, and (v2.0) the null odds:
  [CLS]'s score minus the best span's (the answer is "" above null_score_diff_threshold)."""
  predictions: dict[str, str]
  nbest: dict[str, list[dict]]
  null_odds: dict[str, float]


class _Reader:
  """One SQuAD file's checks: every error is a DataError naming the file (and question)."""

  def __init__(self, path: str):
    self.path = path

  def error(self, message: str) -> DataError:
    return DataError(f"{self.path}: {message}")

  def load(self) -> list:
    """The file's "data" list."""
    text = text_files.read_text(self.path)  # A UTF-8 BOM dropped, as every task's files.
    try:
      value = json.loads(text)
    except json.JSONDecodeError as e:
      raise DataError(f"{self.path}:{e.lineno}:{e.colno}: not valid JSON: {e.msg}") from None
    if not isinstance(value, dict) or not isinstance(value.get("data"), list):
      raise self.error('no "data" list at the top: not a SQuAD file')
    return value["data"]

  def get(self, obj, key: str, kind: type, where: str):
    """obj[key], checked to be a `kind`."""
    if not isinstance(obj, dict) or key not in obj:
      raise self.error(f'{where}: no "{key}"')
    value = obj[key]
    # bool is an int to Python, not to JSON.
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
      raise self.error(f'{where}: "{key}" is {json.dumps(value)[:40]}, not a {kind.__name__}')
    return value

  def questions(self, data: list):
    """(context, qa dict, qid) of every question, in file order; checks ids and structure."""
    seen = set()
    for i, article in enumerate(data):
      for j, paragraph in enumerate(self.get(article, "paragraphs", list, f"data[{i}]")):
        where = f"data[{i}].paragraphs[{j}]"
        context = self.get(paragraph, "context", str, where)
        for k, qa in enumerate(self.get(paragraph, "qas", list, where)):
          qid = self.get(qa, "id", str, f"{where}.qas[{k}]")
          if qid in seen:
            raise self.error(f"question {qid}: the id repeats")
          seen.add(qid)
          self.get(qa, "question", str, f"question {qid}")
          yield context, qa, qid

  def check_version(self, data: list, version_2_with_negative: bool) -> None:
    """A v2.0 file (is_impossible keys) needs version_2_with_negative, and labelled data
    without them must not have it: the model would learn or predict "" for no reason."""
    v2_qid = first_qid = None
    for _, qa, qid in self.questions(data):
      first_qid = first_qid or (qid if "answers" in qa else None)
      if "is_impossible" in qa:
        v2_qid = qid
        break
    if v2_qid and not version_2_with_negative:
      raise self.error(f"question {v2_qid} has is_impossible: SQuAD v2.0 data needs "
                       "--version_2_with_negative")
    if version_2_with_negative and first_qid and not v2_qid:
      raise self.error(f"--version_2_with_negative, but no question has is_impossible (question "
                       f"{first_qid} is the first): SQuAD v1.1 data?")


def split_passage(text: str) -> tuple[list[str], list[int]]:
  """The original's passage words: (doc_tokens, char_to_word_offset), the latter giving for
  each character of `text` the word it is in (the last word before it, for whitespace)."""
  doc_tokens, char_to_word_offset = [], []
  prev_is_whitespace = True
  for c in text:
    if c in WHITESPACE:
      prev_is_whitespace = True
    else:
      if prev_is_whitespace:
        doc_tokens.append(c)
      else:
        doc_tokens[-1] += c
      prev_is_whitespace = False
    char_to_word_offset.append(len(doc_tokens) - 1)
  return doc_tokens, char_to_word_offset


def _doc_spans(num_tokens: int, room: int, doc_stride: int) -> list[tuple[int, int]]:
  """The original's sliding windows over the passage: [(start, length)]; the last one ends
  at the passage's end."""
  spans, start = [], 0
  while start < num_tokens:
    length = min(num_tokens - start, room)
    spans.append((start, length))
    if start + length == num_tokens:
      break
    start += min(length, doc_stride)
  return spans


def _max_context_span(spans: list[tuple[int, int]], num_tokens: int) -> np.ndarray:
  """The original's `_check_is_max_context` for every piece at once: int [num_tokens], the
  window where the piece has the most context (the min of its left and right context, plus
  0.01 x the window's length; the first window wins a tie)."""
  best = np.full(num_tokens, -1)
  best_score = np.full(num_tokens, -np.inf)
  for index, (start, length) in enumerate(spans):
    position = np.arange(start, start + length)
    score = np.minimum(position - start, start + length - 1 - position) + 0.01 * length
    better = score > best_score[start:start + length]
    best[start:start + length][better] = index
    best_score[start:start + length][better] = score[better]
  return best


def _improve_answer_span(doc_ids: np.ndarray, start: int, end: int,
                         answer_ids: np.ndarray) -> tuple[int, int]:
  """The original's `_improve_answer_span`: the first (leftmost) run of pieces within
  [start, end] that is exactly the answer's pieces, else (start, end). E.g. "1895" inside the
  word "(1895-1943).": pieces "( 1895 - 1943 ) ." become just "1895"."""
  n = len(answer_ids)
  for new_start in range(start, end - n + 2):
    if n and np.array_equal(doc_ids[new_start:new_start + n], answer_ids):
      return new_start, new_start + n - 1
  return start, end


@dataclasses.dataclass
class _Passage:
  """A passage's wordpieces, shared by its questions: ids and strings [pieces], the word of
  each piece (tok_to_orig [pieces]) and the first piece of each word (orig_to_tok [words])."""
  ids: np.ndarray
  tokens: list[str]
  tok_to_orig: np.ndarray
  orig_to_tok: np.ndarray


def _passages(examples: list[SquadExample], tokenizer: FullTokenizer) -> dict[int, _Passage]:
  """id(doc_tokens) -> _Passage for every passage of the examples: all their distinct words
  go through the tokenizer in one batch (one TF call is far faster than one per word)."""
  by_passage = {id(e.doc_tokens): e.doc_tokens for e in examples}
  word_index = {}
  for doc_tokens in by_passage.values():
    for word in doc_tokens:
      word_index.setdefault(word, len(word_index))
  word_ids = [ids.astype(np.int64) for ids in tokenizer.tokenize_ids(list(word_index))]
  passages = {}
  for key, doc_tokens in by_passage.items():
    pieces = [word_ids[word_index[w]] for w in doc_tokens]
    lengths = np.array([len(p) for p in pieces], np.int64)
    ids = np.concatenate(pieces) if pieces else np.zeros([0], np.int64)
    passages[key] = _Passage(ids, tokenizer.convert_ids_to_tokens(ids.tolist()),
                             np.repeat(np.arange(len(pieces)), lengths),
                             np.cumsum(lengths) - lengths)
  return passages


def _answer_span(example: SquadExample, passage: _Passage,
                 answer_ids: np.ndarray) -> tuple[int, int]:
  """A training answer's first and last piece in the passage (-1, -1 if impossible)."""
  if example.is_impossible:
    return -1, -1
  start = int(passage.orig_to_tok[example.start_position])
  if example.end_position < len(example.doc_tokens) - 1:
    end = int(passage.orig_to_tok[example.end_position + 1]) - 1
  else:
    end = len(passage.ids) - 1
  return _improve_answer_span(passage.ids, start, end, answer_ids)


def _final_text(pred_text: str, orig_words: list[str], tok_text: str,
                verbose: bool = False) -> str:
  """The original's `get_final_text`: the predicted pieces' text `pred_text` projected back
  onto the passage's words ("Steve Smith's" -> "Steve Smith"), by aligning the characters of
  orig_text = " ".join(orig_words) with those of its basic tokenization `tok_text`, spaces
  ignored; orig_text itself where they do not align."""
  orig_text = " ".join(orig_words)
  # The characters before each word's end, spaces not counted (words hold no spaces).
  ends = list(itertools.accumulate(map(len, orig_words)))
  start = tok_text.find(pred_text)
  end = start + len(pred_text) - 1
  if start == -1:
    reason = f"Unable to find text: '{pred_text}' in '{orig_text}'"
  elif ends[-1] != len(tok_text) - tok_text.count(" "):
    reason = f"Length not equal after stripping spaces: '{orig_text}' vs '{tok_text}'"
  elif end < 0 or tok_text[start] == " " or tok_text[end] == " ":  # end < 0: pred_text "".
    reason = "Couldn't map start or end position"
  else:
    # A character's index among the non-spaces, then its place in orig_text: that index
    # plus one space per word before its word.
    ns_start = start - tok_text.count(" ", 0, start)
    ns_end = end - tok_text.count(" ", 0, end)
    return orig_text[ns_start + bisect.bisect_right(ends, ns_start):
                     ns_end + bisect.bisect_right(ends, ns_end) + 1]
  if verbose:
    logging.info(reason)
  return orig_text


def _softmax(scores: list[float]) -> list[float]:
  """The original's `_compute_softmax`, in Python floats as it is (numpy's exp may differ in
  the last bit)."""
  top = max(scores)
  exps = [math.exp(s - top) for s in scores]
  total = sum(exps)
  return [x / total for x in exps]


class _SpanSearch:
  """The original's candidate spans of every feature at once, in numpy.

  For each feature: the n_best_size best start and end positions (ties in position order);
  of their pairs, those inside the window's passage, starting where the window gives the
  piece its max context, not ending before the start and at most max_answer_length long.
  The candidates are ordered by example, then by score (start + end logit) from the best,
  ties in the original's order (feature, start rank, end rank). Lists [candidates], for the
  per-example loop: feature, start, end (positions in the feature), start_logit, end_logit,
  score.
  """

  def __init__(self, start_logits: np.ndarray, end_logits: np.ndarray, features: Features,
               num_examples: int, n_best_size: int, max_answer_length: int):
    num, seq = start_logits.shape
    n = min(n_best_size, seq)
    # Stable: ties in position order, as the original's sorted().
    top_start = np.argsort(-start_logits, axis=1, kind="stable")[:, :n]  # [num, n]
    top_end = np.argsort(-end_logits, axis=1, kind="stable")[:, :n]
    in_passage = np.zeros([num, seq], bool)
    max_context = np.zeros([num, seq], bool)
    for f, x in enumerate(features.extras):
      window = slice(x.doc_offset, x.doc_offset + len(x.tokens))
      in_passage[f, window] = True
      max_context[f, window] = x.token_is_max_context
    s, e = top_start[:, :, None], top_end[:, None, :]
    valid = ((e >= s) & (e - s < max_answer_length) &
             np.take_along_axis(in_passage & max_context, top_start, 1)[:, :, None] &
             np.take_along_axis(in_passage, top_end, 1)[:, None, :])
    feature, i, j = np.nonzero(valid)  # In the original's order: feature, start, end rank.
    start, end = top_start[feature, i], top_end[feature, j]
    score = start_logits[feature, start] + end_logits[feature, end]
    example = features.example_index[feature]
    order = np.lexsort((np.arange(len(score)), -score, example))
    feature, start, end = feature[order], start[order], end[order]
    self.feature, self.start, self.end = feature.tolist(), start.tolist(), end.tolist()
    self.start_logit = start_logits[feature, start].tolist()
    self.end_logit = end_logits[feature, end].tolist()
    self.score = score[order].tolist()
    self._bounds = np.searchsorted(example[order], np.arange(num_examples + 1)).tolist()

  def of_example(self, index: int) -> range:
    """The candidates of example `index`, best first."""
    return range(self._bounds[index], self._bounds[index + 1])


@register
class SquadTask(FineTuningTask):
  """SQuAD v1.1 / v2.0 (`config.version_2_with_negative`): train on --train_file, predict
  (and evaluate, when it has answers) on --predict_file, as run_squad.py."""
  config_class = SquadConfig
  primary_metric = "f1"
  loss_reads_padding = True  # The start/end softmax spans every position, padding included.
  example_noun = "questions"
  # run_squad's output layer on the sequence output: start and end logits.
  tf1_head = ("cls/squad/output_weights", "cls/squad/output_bias")
  hf_architecture = "BertForQuestionAnswering"  # qa_outputs: start and end, as ours.
  input_args = ("train_file", "predict_file", "verbose_logging")

  def __init__(self, config: SquadConfig, train_file: str | None = None,
               predict_file: str | None = None, verbose_logging: bool = False):
    super().__init__(config)
    self.files = {"train": train_file, "predict": predict_file}
    self.verbose_logging = verbose_logging
    # The predict file's "data" list, which evaluation scores against; per split, the
    # training answers skipped because their text is not in the passage (as the original).
    self.datasets = {}
    self.unmatched_answers = {}

  @classmethod
  def from_config(cls, config: SquadConfig, data: str | None = None) -> "SquadTask":
    return cls(config, predict_file=data)

  # Examples.
  def splits(self, mode: str) -> list[str]:
    if mode not in ("train", "eval", "predict"):
      raise ValueError(f"unknown mode {mode!r}")
    return ["train"] if mode == "train" else ["predict"]

  def split_file(self, split: str) -> str:
    path = self.files.get(split)
    if not path:
      raise DataError(f"--{split}_file is required to {split}" if split == "train" else
                      "--predict_file is required to evaluate or predict")
    return path

  def check_inputs(self, modes: list[str]) -> None:
    for split in sorted({s for mode in modes for s in self.splits(mode)}):
      path = self.split_file(split)
      if not tf.io.gfile.exists(path):
        raise DataError(f"--{split}_file={path}: not found")

  def read_examples(self, split: str) -> list[SquadExample]:
    """The original's read_squad_examples; training ("train") also reads the answers."""
    return self._read(self.split_file(split), split)

  def transfer_examples(self, path: str) -> list[SquadExample]:
    """`path` in the predict file's layout (its answers, if any, not read)."""
    return self._read(path, "transfer")

  def _read(self, path: str, split: str) -> list[SquadExample]:
    reader = _Reader(path)
    data = reader.load()
    reader.check_version(data, self.config.version_2_with_negative)
    is_training = split == "train"
    examples, unmatched, passages = [], 0, {}
    for context, qa, qid in reader.questions(data):
      if context not in passages:
        passages = {context: split_passage(context)}  # A passage's questions are adjacent.
      doc_tokens, char_to_word_offset = passages[context]
      example = SquadExample(qid, qa["question"], context, doc_tokens)
      if is_training:
        if not self._read_answer(reader, example, qa, char_to_word_offset):
          unmatched += 1
          continue
      examples.append(example)
    if unmatched:
      logging.warning("%s: skipped %d of %d training questions whose answer text is not in "
                      "the passage", reader.path, unmatched, unmatched + len(examples))
    if not is_training:
      self.datasets[split] = data
    self.unmatched_answers[split] = unmatched
    return examples

  def _read_answer(self, reader: _Reader, example: SquadExample, qa: dict,
                   char_to_word_offset: list[int]) -> bool:
    """Sets a training example's answer; False if its text cannot be found in the passage."""
    where = f"question {example.qas_id}"
    if self.config.version_2_with_negative:
      example.is_impossible = reader.get(qa, "is_impossible", bool, where)
    answers = reader.get(qa, "answers", list, where)
    if example.is_impossible:
      example.start_position = example.end_position = -1
      example.orig_answer_text = ""
      return True
    if len(answers) != 1:
      raise reader.error(f"{where}: {len(answers)} answers; a training question has exactly 1")
    text = reader.get(answers[0], "text", str, where)
    offset = reader.get(answers[0], "answer_start", int, where)
    if not text or offset < 0 or offset + len(text) > len(example.context):
      raise reader.error(f"{where}: the answer ({len(text)} characters at answer_start "
                         f"{offset}) is not within the context ({len(example.context)} "
                         f"characters)")
    example.orig_answer_text = text
    example.start_position = char_to_word_offset[offset]
    example.end_position = char_to_word_offset[offset + len(text) - 1]
    # Weird Unicode can keep the annotated text from being recovered: skip those.
    actual = " ".join(example.doc_tokens[example.start_position:example.end_position + 1])
    if actual.find(" ".join(text.split())) == -1:
      logging.warning("Could not find answer: '%s' vs. '%s'", actual, " ".join(text.split()))
      return False
    return True

  # Features and records.
  def convert_examples(self, examples: list[SquadExample], tokenizer: FullTokenizer,
                       is_training: bool) -> Features:
    """The original's convert_examples_to_features: a feature per window of each passage.
    Training features carry the answer positions, and no extras (nothing post-processes
    them; SQuAD's 88k training windows would hold ~0.4 GB of them)."""
    cfg = self.config
    question_ids = tokenizer.tokenize_ids([e.question_text for e in examples])
    passages = _passages(examples, tokenizer)
    answer_ids = (tokenizer.tokenize_ids([e.orig_answer_text for e in examples])
                  if is_training else [None] * len(examples))
    records, example_index, extras = [], [], []
    for index, (example, query, answer) in enumerate(zip(examples, question_ids, answer_ids)):
      query = query[:cfg.max_query_length].astype(np.int64)
      passage = passages[id(example.doc_tokens)]
      spans = _doc_spans(len(passage.ids), cfg.max_seq_length - len(query) - 3, cfg.doc_stride)
      if is_training:
        answer_span = _answer_span(example, passage, answer.astype(np.int64))
      else:
        max_context = _max_context_span(spans, len(passage.ids))
      offset = len(query) + 2
      for span_index, (start, length) in enumerate(spans):
        window = slice(start, start + length)
        record = self._record(tokenizer, query, passage.ids[window])
        record["unique_ids"] = FIRST_UNIQUE_ID + len(records)
        if is_training:
          record.update(self._targets(example, answer_span, start, length, offset))
        else:
          extras.append(SquadFeature(span_index, offset, passage.tokens[window],
                                     passage.tok_to_orig[window],
                                     max_context[window] == span_index))
        records.append(record)
        example_index.append(index)
    return Features(records, np.array(example_index, np.int64), extras or None)

  def _record(self, tokenizer: FullTokenizer, query: np.ndarray, doc: np.ndarray) -> dict:
    """input_ids, input_mask, segment_ids int64 [max_seq_length]: [CLS] query [SEP] (segment
    0) doc [SEP] (segment 1), zero-padded as the original."""
    seq = self.config.max_seq_length
    ids = np.concatenate([[tokenizer.cls_id], query, [tokenizer.sep_id], doc,
                          [tokenizer.sep_id]]).astype(np.int64)
    input_ids = np.zeros(seq, np.int64)
    input_ids[:len(ids)] = ids
    segment_ids = np.zeros(seq, np.int64)
    segment_ids[len(query) + 2:len(ids)] = 1
    return {"input_ids": input_ids, "input_mask": (np.arange(seq) < len(ids)).astype(np.int64),
            "segment_ids": segment_ids}

  @staticmethod
  def _targets(example: SquadExample, answer_span: tuple[int, int], start: int, length: int,
               offset: int) -> dict:
    """A training window's answer positions: [CLS] (0, 0) when the question is impossible
    or the window does not hold the whole answer."""
    first, last = answer_span
    if example.is_impossible or not (first >= start and last <= start + length - 1):
      first = last = 0
    else:
      first, last = first - start + offset, last - start + offset
    # The original's is_impossible is the question's, not the window's.
    return {"start_positions": first, "end_positions": last,
            "is_impossible": int(example.is_impossible)}

  def record_layout(self, is_training: bool) -> list[schema.Feature]:
    return schema.squad_features(self.config.max_seq_length, is_training)

  # Model and loss.
  def build_model(self, bert_config: BertConfig) -> tf_keras.Model:
    """BertSpanLabeler: {input_word_ids, input_mask, input_type_ids} int32 [batch, seq] ->
    [start_logits, end_logits] float [batch, seq]; the encoder is checkpoint_items["encoder"]."""
    return create_variables(BertSpanLabeler(
        build_encoder(bert_config), initializer=initializer(bert_config),
        name="bert_span_labeler"))

  def loss(self, features: dict, outputs, counts=None) -> tuple[tf.Tensor, dict]:
    """The original's: (start loss + end loss) / 2, each the mean over the records of the
    softmax cross-entropy of the true position; in float32 whatever the model computes in."""
    loss, metrics = 0.0, {}
    for name, logits in zip(("start", "end"), outputs):
      logits = tf.cast(logits, tf.float32)
      positions = tf.reshape(features[f"{name}_positions"], [-1])
      count = losses.records(counts, positions)
      loss += losses.mean(
          tf.nn.sparse_softmax_cross_entropy_with_logits(positions, logits), count) / 2
      hits = tf.equal(tf.argmax(logits, -1, output_type=positions.dtype), positions)
      metrics[f"{name}_accuracy"] = losses.mean(hits, count)
    return loss, metrics

  def soft_targets(self, features: dict, outputs) -> dict[str, SoftTarget]:
    """The teacher's softmax over the positions, for the start and for the end (every
    position, padding too, as the loss)."""
    del features
    start_logits, end_logits = outputs
    return {"start_logits": SoftTarget("positions", start_logits),
            "end_logits": SoftTarget("positions", end_logits)}

  def predict_outputs(self, features: dict, outputs) -> dict[str, tf.Tensor]:
    """start_logits, end_logits float32 [batch, seq]; unique_ids int32 [batch], which
    postprocess checks against the features' own."""
    start_logits, end_logits = outputs
    return {"start_logits": tf.cast(start_logits, tf.float32),
            "end_logits": tf.cast(end_logits, tf.float32),
            "unique_ids": tf.reshape(features["unique_ids"], [-1])}

  # Predictions, metrics and files.
  def postprocess(self, examples: list[SquadExample], features: Features,
                  outputs: dict[str, np.ndarray]) -> SquadPredictions:
    """The original's write_predictions (without the writing), for all examples at once.

    Args:
      examples: as read_examples gave them.
      features: convert_examples(examples, ..., is_training=False).
      outputs: start_logits, end_logits [num_features, seq] (and optionally unique_ids
        [num_features]), in features' order.
    """
    if "unique_ids" in outputs:
      expected = [r["unique_ids"] for r in features.records]
      if not np.array_equal(np.reshape(outputs["unique_ids"], [-1]), expected):
        raise ValueError("the outputs' unique_ids are not the features' (out of order?)")
    # Float64 sums of float32 logits, as the original's Python floats.
    start_logits = np.asarray(outputs["start_logits"], np.float64)
    end_logits = np.asarray(outputs["end_logits"], np.float64)
    search = _SpanSearch(start_logits, end_logits, features, len(examples),
                         self.config.n_best_size, self.config.max_answer_length)
    words = self._basic_words(examples)
    # Example -> its feature where the null answer ([CLS]: start + end logit) scores lowest,
    # the first of equals.
    null_scores = start_logits[:, 0] + end_logits[:, 0]
    null_feature = {}
    for f in np.lexsort((np.arange(len(features)), null_scores,
                         features.example_index)).tolist():
      null_feature.setdefault(int(features.example_index[f]), f)
    out = SquadPredictions({}, {}, {})
    for index, example in enumerate(examples):
      f = null_feature.get(index)
      null = (None if f is None else
              (float(null_scores[f]), float(start_logits[f, 0]), float(end_logits[f, 0])))
      self._predict(example, features.extras, search, search.of_example(index), words,
                    null, out)
    return out

  def _basic_words(self, examples: list[SquadExample]) -> dict[str, str]:
    """Word -> its basic tokenization (the original's BasicTokenizer: no wordpieces), pieces
    joined by spaces, for every word of the examples' passages: get_final_text aligns a
    span's words with it. A text tokenizes as its words one by one (the tokenizer splits at
    spaces first), so the words go through the tokenizer once, in one batch (SQuAD dev:
    41k words, 0.3 s)."""
    passages = {id(e.doc_tokens): e.doc_tokens for e in examples}.values()
    words = list({w: None for doc_tokens in passages for w in doc_tokens})
    if not words:
      return {}
    tokens = split_words(tf.constant(words), self.config.do_lower_case)
    joined = tf.strings.reduce_join(tokens, axis=-1, separator=" ").numpy()
    return {w: t.decode("utf-8") for w, t in zip(words, joined)}

  def _predict(self, example: SquadExample, extras: list[SquadFeature], search: _SpanSearch,
               candidates: range, words: dict[str, str], null: tuple | None,
               out: SquadPredictions) -> None:
    """One example's n-best list, answer and (v2.0) null odds, into `out`.

    null: (score, start logit, end logit) of [CLS] in the window where it scores lowest;
      None if the example has no window.
    """
    cfg = self.config
    v2 = cfg.version_2_with_negative
    # The original's null starts from 1e6 and start and end logits 0 (as when no window).
    score_null, null_entry = 1000000.0, ("", 0.0, 0.0)
    if v2 and null is not None and null[0] < score_null:
      score_null, null_entry = null[0], ("", null[1], null[2])
    nbest, seen, null_pending = [], set(), v2
    for c in candidates:
      if len(nbest) >= cfg.n_best_size:
        break
      # The null candidate sorts after the spans of its own score or more.
      if null_pending and search.score[c] < null_entry[1] + null_entry[2]:
        null_pending = False
        nbest.append(null_entry)
        seen.add("")
        if len(nbest) >= cfg.n_best_size:
          break
      text = self._span_text(example, extras[search.feature[c]], search.start[c],
                             search.end[c], words)
      if text not in seen:
        seen.add(text)
        nbest.append((text, search.start_logit[c], search.end_logit[c]))
    if v2 and "" not in seen:
      nbest.append(null_entry)
    if not nbest:  # The original's nonce for a question with no valid span.
      nbest.append(("empty", 0.0, 0.0))
    probs = _softmax([s + e for _, s, e in nbest])
    out.nbest[example.qas_id] = [
        {"text": text, "probability": p, "start_logit": s, "end_logit": e}
        for (text, s, e), p in zip(nbest, probs)]
    if not v2:
      out.predictions[example.qas_id] = nbest[0][0]
      return
    best = next((entry for entry in nbest if entry[0]), None)
    if best is None:
      out.null_odds[example.qas_id] = score_null
      out.predictions[example.qas_id] = ""
    else:
      diff = score_null - best[1] - best[2]
      out.null_odds[example.qas_id] = diff
      out.predictions[example.qas_id] = "" if diff > cfg.null_score_diff_threshold else best[0]

  def _span_text(self, example: SquadExample, feature: SquadFeature, start: int, end: int,
                 words: dict[str, str]) -> str:
    """The passage text of the pieces at start ... end (positions in the feature)."""
    a, b = start - feature.doc_offset, end - feature.doc_offset
    tok_text = " ".join(feature.tokens[a:b + 1]).replace(" ##", "").replace("##", "")
    tok_text = " ".join(tok_text.strip().split())
    orig_words = example.doc_tokens[feature.token_to_orig[a]:feature.token_to_orig[b] + 1]
    orig_tokenized = " ".join(filter(None, (words[w] for w in orig_words)))
    return _final_text(tok_text, orig_words, orig_tokenized, self.verbose_logging)

  def evaluate(self, examples: list[SquadExample],
               predictions: SquadPredictions) -> dict[str, float]:
    """The official evaluate-v1.1.py ({exact_match, f1}) or evaluate-v2.0.py (exact, f1, ...,
    best_f1 over null thresholds) of the predictions against --predict_file's answers, x100."""
    del examples  # Scored against every question of the file, as the official scripts do.
    path = self.split_file("predict")
    if "predict" not in self.datasets:
      self.datasets["predict"] = _Reader(path).load()
    data = self.datasets["predict"]
    try:
      if self.config.version_2_with_negative:
        results = scoring.evaluate_v2(data, predictions.predictions, predictions.null_odds)
      else:
        results = scoring.evaluate_v1(data, predictions.predictions)
    except ValueError as e:
      raise DataError(f"{path}: {e}") from None
    return {k: float(v) for k, v in results.items()}

  def write_predictions(self, output_dir: str, split: str, examples: list[SquadExample],
                        predictions: SquadPredictions) -> list[str]:
    """The original's predictions.json, nbest_predictions.json and (v2.0) null_odds.json."""
    del split, examples  # One predict split; the predictions name their questions.
    tf.io.gfile.makedirs(output_dir)
    files = [("predictions.json", predictions.predictions),
             ("nbest_predictions.json", predictions.nbest)]
    if self.config.version_2_with_negative:
      files.append(("null_odds.json", predictions.null_odds))
    paths = []
    for name, value in files:
      paths.append(os.path.join(output_dir, name))
      write_text(paths[-1], json.dumps(value, indent=4) + "\n")
    return paths

  # Serving.
  def serving_module(self, model: tf_keras.Model, tokenizer: FullTokenizer) -> tf.Module:
    from bert_tf.tasks.squad import serving  # pylint: disable=g-import-not-at-top
    return serving.QuestionAnswerer(model, tokenizer, self.config)

  def warmup_inputs(self, examples: list[SquadExample] | None = None) -> list[dict[str, str]]:
    """{question, context} of the first 3 examples, else of built-in samples (one empty)."""
    if examples:
      return [{"question": e.question_text, "context": e.context} for e in examples[:3]]
    return [dict(r) for r in SAMPLE_REQUESTS]
