"""Named entity recognition (CoNLL-2003) as the paper fine-tunes it (its section 5.3), one file.

  examples     data_dir's train.txt, dev.txt and test.txt: CoNLL files (`word POS chunk tag` a
               line, a blank line between sentences, -DOCSTART- lines starting documents) or
               `word<TAB>tag` files (any number of columns, separated by spaces or by tabs, the
               word first and the tag last, as many on each line as on the first; a UTF-8 BOM
               dropped) -> one `Sentence` per sentence; tags IOB1 or IOB2 (detected
               from the training file, or given), the label set the training file's tags
  features     each word's wordpieces (the project's tokenizer, word by word: "1996-08-30" becomes
               several basic tokens, all the word's); the word's label on its first piece, -1
               (ignored) on its other pieces, except that the first piece of each later basic token
               of the word ("U.S." is u . s .) carries the word's continuation tag (I-LOC for
               B-LOC): served raw text is split into the reference tokenizer's words, so there each
               basic token is tagged, and a CoNLL word read whole must come out as one entity. With
               document_context (the paper's "maximal document context", on by default) a sentence
               is encoded with as many pieces of its document's neighbouring sentences as fit,
               balanced left and right, one segment; loss and predictions on the sentence's own
               words only. A sentence longer than the window is split into runs of whole words, one
               feature each, so every word is labelled, and predicted, exactly once
  model        the Model Garden's BertTokenClassifier: sequence output -> dropout -> dense ->
               {"logits": [batch, seq, num_labels]}; no CRF. Feature-based (the paper's
               Table 7, `feature_based`): the encoder frozen (no weight of it updated, dropout
               off), the hidden states of chosen layers (FEATURE_BASED) combined -> a fresh
               2-layer BiLSTM (lstm_units each way, masked by input_mask) -> dropout -> dense;
               the same inputs and {"logits"} output, so serving is unchanged
  loss         mean softmax cross-entropy over the labelled positions, in float32
  predictions  a word's tag: the argmax of the logits at its first piece (the continuation
               tags are learnt for serving, never read here)
  metrics      conlleval's (seqeval's default mode is its port): entity precision, recall and
               F1, overall and per type (f1_PER ...), and token accuracy; in percent, as
               conlleval prints them
  files        predictions.txt (`word gold predicted`, blank lines between sentences,
               -DOCSTART- lines kept: what conlleval reads) and conlleval_results.txt (its
               report on that file)

conlleval counts a `-DOCSTART- O O` line as a token (it only skips `-X-` lines), so the
accuracy here counts each -DOCSTART- line of predictions.txt as a correctly tagged token too:
the numbers reported are conlleval's on the file written.
"""
import collections
import dataclasses
import os
import re
from typing import ClassVar

from absl import logging
from official.nlp.modeling import models
import numpy as np
from seqeval.metrics.sequence_labeling import get_entities
import tensorflow as tf
import tf_keras

from bert_tf.common.errors import DataError
from bert_tf.common.files import write_text
from bert_tf.modeling.configs import BertConfig
from bert_tf.modeling.encoder import INPUT_NAMES, build_encoder, create_variables, initializer
from bert_tf.modeling.feature_extractor import FeatureExtractor
from bert_tf.finetuning import register
from bert_tf.finetuning import losses
from bert_tf.finetuning.distillation import SoftTarget
from bert_tf.finetuning import text_files
from bert_tf.finetuning.task import Features, FineTuningTask, TaskConfig
from bert_tf.tokenization import FullTokenizer
from tfrecords import schema

SCHEMES = ("iob1", "iob2")
DOCSTART = "-DOCSTART-"
IGNORED = -1  # The label id of the positions the loss and the predictions skip.
FILES = {"train": "train.txt", "dev": "dev.txt", "test": "test.txt"}
TAG = re.compile(r"O|[BI]-.+")
# The paper's Table 7 rows: name -> (the layers, as feature_extraction counts them: 0 the
# embeddings, -1 the last; None for all), and how they are combined ("sum": ELMo's scalar mix).
FEATURE_BASED = {
    "embeddings": ((0,), "one"),
    "second_to_last": ((-2,), "one"),
    "last": ((-1,), "one"),
    "sum_last_four": ((-4, -3, -2, -1), "sum"),
    "concat_last_four": ((-4, -3, -2, -1), "concat"),
    "sum_all": (None, "sum"),
}
# Warm-up requests when no dev data is at hand: a sentence, a short document, an empty text.
SAMPLE_TEXTS = ("EU rejects German call to boycott British lamb.",
                "Peter Blackburn, BRUSSELS 1996-08-22. The European Commission said on Thursday "
                "it disagreed with German advice to consumers to shun British lamb until "
                "scientists determine whether mad cow disease can be transmitted to sheep.",
                "")


@dataclasses.dataclass
class NerConfig(TaskConfig):
  """What a fine-tuned tagger is beyond its encoder: its tags (in label-id order), the scheme
  they follow ("iob1" | "iob2") and whether features had document context."""
  kind: ClassVar[str] = "ner"
  trained_fields: ClassVar[tuple[str, ...]] = TaskConfig.trained_fields + (
      "labels", "scheme", "document_context", "feature_based", "lstm_units")
  data_fields: ClassVar[tuple[str, ...]] = ("labels",)
  head_fields: ClassVar[tuple[str, ...]] = ("labels", "feature_based", "lstm_units")
  labels: list[str] = dataclasses.field(default_factory=list)
  scheme: str = "iob2"
  document_context: bool = True
  feature_based: str = ""  # "": fine-tuning; else a FEATURE_BASED name.
  lstm_units: int = 768  # Each direction's, feature-based only (the paper's 768).

  def __post_init__(self):
    if self.scheme not in SCHEMES:
      raise ValueError(f"scheme {self.scheme!r}: must be one of {', '.join(SCHEMES)}")
    if self.feature_based and self.feature_based not in FEATURE_BASED:
      raise ValueError(f"--feature_based={self.feature_based}: must be one of "
                       f"{', '.join(FEATURE_BASED)} (or empty: fine-tuning)")
    if self.lstm_units < 1:
      raise ValueError(f"--lstm_units={self.lstm_units}: must be positive")
    if self.max_seq_length < 3:
      raise ValueError(f"--max_seq_length={self.max_seq_length}: [CLS] and [SEP] leave no room")


@dataclasses.dataclass
class Sentence:
  """One sentence of a file: its words and their tags, its document (counted from 0 in the
  file), the line of its first word (the others follow, one a line), and whether a -DOCSTART-
  line came before it."""
  words: list[str]
  tags: list[str]
  document: int
  line: int
  doc_start: bool = False


@dataclasses.dataclass
class NerFeature:
  """Which words of its sentence a feature predicts: words first_word, first_word + 1, ...,
  whose first pieces are at `positions` (int [words]) of the feature."""
  first_word: int
  positions: np.ndarray


# Reading.
def _fields(line: str) -> list[str]:
  """A line's columns: tab-separated where it holds a tab (a word may then hold spaces:
  `New York<TAB>B-LOC`), else separated by runs of whitespace."""
  return line.split("\t") if "\t" in line else line.split()


def _word_and_tag(path: str, line_number: int, line: str, columns: int,
                  first_line: int) -> tuple[str, str]:
  """A line's word (its first column) and tag (its last); DataError unless it has the
  `columns` columns of the file's first line (`first_line`)."""
  fields = _fields(line)
  if columns < 2:  # The file's first line: at least a word and its tag.
    raise DataError(f"{path}:{line_number}: 1 column; a line is `word ... tag` (the word first, "
                    "the tag last; separated by tabs or spaces)")
  if len(fields) != columns:
    raise DataError(f"{path}:{line_number}: {len(fields)} column(s); the file's lines have "
                    f"{columns} (the word first, the tag last; separated by tabs or spaces), "
                    f"as its first, line {first_line}")
  word, tag = fields[0].strip(), fields[-1].strip()
  if not word:
    raise DataError(f"{path}:{line_number}: an empty word")
  if not TAG.fullmatch(tag):
    raise DataError(f"{path}:{line_number}: tag {tag!r} is not O, B-<type> or I-<type>")
  return word, tag


def read_conll(path: str, tagged: bool = True) -> list[Sentence]:
  """A CoNLL or `word<TAB>tag` file's sentences, in order (`text_files.read_text`: a UTF-8 BOM
  dropped); DataError naming file and line. Not `tagged`: each line's first column is its word
  and any others are not read (a file of words alone, or a tagged one's words), tags "O"."""
  lines = text_files.read_text(path).split("\n")
  sentences, words, tags = [], [], []
  columns, first_line, document, doc_start = None, 0, 0, False
  for number, line in enumerate(lines + [""], start=1):
    line = line.rstrip("\r")
    if line.split()[:1] == [DOCSTART] or not line.strip():
      if words:
        sentences.append(Sentence(words, tags, document, number - len(words), doc_start))
        words, tags, doc_start = [], [], False
      if line.strip():  # -DOCSTART-: the next sentence starts a document.
        document += bool(sentences)
        doc_start = True
      continue
    if not tagged:
      words.append(_fields(line)[0].strip())
      tags.append("O")
      continue
    if columns is None:
      columns, first_line = len(_fields(line)), number
    word, tag = _word_and_tag(path, number, line, columns, first_line)
    words.append(word)
    tags.append(tag)
  return sentences


def _entity_starts(sentences: list[Sentence]) -> tuple[tuple | None, tuple | None]:
  """The first (line, tag) where an I- tag starts an entity (only IOB1 does that) and the
  first where a B- tag does (only IOB2 does: IOB1's B- only splits two adjacent entities of
  one type); None where there is none."""
  i_start = b_start = None
  for sentence in sentences:
    previous = "O"
    for offset, tag in enumerate(sentence.tags):
      if tag != "O" and tag[2:] != previous[2:]:
        if tag[0] == "I" and i_start is None:
          i_start = (sentence.line + offset, tag)
        if tag[0] == "B" and b_start is None:
          b_start = (sentence.line + offset, tag)
      previous = tag
    if i_start and b_start:
      break
  return i_start, b_start


def check_scheme(path: str, sentences: list[Sentence], scheme: str) -> str:
  """The file's tagging scheme: `scheme` ("iob1" | "iob2") when its tags follow it, detected
  for "auto" (IOB2 when nothing tells); DataError naming the line that contradicts it."""
  if scheme not in ("auto", *SCHEMES):
    raise ValueError(f"--scheme={scheme}: must be auto, iob1 or iob2")
  i_start, b_start = _entity_starts(sentences)
  if scheme == "auto":
    if i_start and b_start:
      raise DataError(f"{path}:{i_start[0]}: {i_start[1]} starts an entity (IOB1), but so does "
                      f"{b_start[1]} at line {b_start[0]} (IOB2): the file mixes the schemes")
    return "iob1" if i_start else "iob2"
  if scheme == "iob1" and b_start:
    raise DataError(f"{path}:{b_start[0]}: {b_start[1]} starts an entity, which IOB1 forbids "
                    "(its B- only splits two adjacent entities of one type): an IOB2 file? "
                    "(--scheme=iob2)")
  if scheme == "iob2" and i_start:
    raise DataError(f"{path}:{i_start[0]}: {i_start[1]} starts an entity, which IOB2 forbids "
                    "(every entity starts with B-): an IOB1 file? (--scheme=iob1)")
  return scheme


def label_list(sentences: list[Sentence]) -> list[str]:
  """The tags of the sentences, "O" first, then sorted."""
  return sorted({t for s in sentences for t in s.tags}, key=lambda t: (t != "O", t))


def continuation(tag: str) -> str:
  """The tag of a word's later part in either scheme: I-<type> inside an entity, else O."""
  return "O" if tag == "O" else f"I-{tag[2:]}"


# Features.
def _word_ids(examples: list[Sentence], tokenizer: FullTokenizer) -> dict[str, np.ndarray]:
  """Word -> its wordpiece ids, int64, for every distinct word of the examples, in one batch
  through the tokenizer; a word the tokenizer drops entirely (control characters) is [UNK],
  so that every word has a first piece."""
  words = list({w: None for s in examples for w in s.words})
  unknown = np.array([tokenizer.unk_id], np.int64)
  return {w: ids.astype(np.int64) if len(ids) else unknown
          for w, ids in zip(words, tokenizer.tokenize_ids(words))}


def _units(examples: list[Sentence], document_context: bool) -> list[list[int]]:
  """The examples' indices grouped by what a feature may take context from: runs of
  consecutive sentences of one document, or each sentence alone."""
  units = []
  for index, sentence in enumerate(examples):
    if (document_context and units and
        examples[units[-1][-1]].document == sentence.document):
      units[-1].append(index)
    else:
      units.append([index])
  return units


def _spans(lengths: np.ndarray, room: int) -> list[tuple[int, int]]:
  """A sentence's words as runs [first, end) of whole words of at most `room` pieces in all
  (a longer word alone, cut to `room` pieces: its first piece is all it needs)."""
  spans, first, total = [], 0, 0
  for word, length in enumerate(lengths.tolist()):
    if total and total + length > room:
      spans.append((first, word))
      first, total = word, 0
    total += length
  spans.append((first, len(lengths)))
  return spans


def _context(start: int, end: int, size: int, room: int) -> tuple[int, int]:
  """The window [start - left, end + right) around pieces [start, end) of a unit of `size`
  pieces: the `room` left filled with context, half on each side where both sides have it."""
  free = room - (end - start)
  left = min(start, max(free // 2, free - (size - end)))
  right = min(size - end, free - left)
  return start - left, end + right


# The feature-based model.
def feature_layers(name: str, num_layers: int) -> tuple[int, ...]:
  """The layers (0 = embeddings, -1 = the last) that FEATURE_BASED[name] reads from an encoder
  of num_layers Transformer layers; ValueError naming the flag if it has too few."""
  layers, _ = FEATURE_BASED[name]
  if layers is None:
    return tuple(range(num_layers + 1))
  needed = max(-layer for layer in layers)
  if needed > num_layers:
    raise ValueError(f"--feature_based={name}: needs {needed} Transformer layers; the model "
                     f"has {num_layers}")
  return layers


@tf_keras.utils.register_keras_serializable(package="bert_tf")
class ScalarMix(tf_keras.layers.Layer):
  """ELMo's scalar mix: gamma * sum_j softmax(s)_j h_j of N same-shaped tensors h_j, with
  learned scalars s (from 0: the mean at first) and gamma (from 1)."""

  def build(self, input_shape):
    self.scalars = self.add_weight("scalars", [len(input_shape)], initializer="zeros")
    self.gamma = self.add_weight("gamma", [], initializer="ones")
    super().build(input_shape)

  def call(self, states: list[tf.Tensor]) -> tf.Tensor:
    """N [batch, seq, H] -> [batch, seq, H]."""
    weights = tf.unstack(tf.cast(tf.nn.softmax(self.scalars), states[0].dtype))
    return tf.cast(self.gamma, states[0].dtype) * tf.add_n(
        [w * h for w, h in zip(weights, states)])


@tf_keras.utils.register_keras_serializable(package="bert_tf")
class FeatureBasedHead(tf_keras.layers.Layer):
  """Frozen features -> logits: the layers combined ("one": the only one; "concat": along
  features; "sum": ScalarMix), a 2-layer BiLSTM over the sequence (padding masked), dropout,
  and a dense classifier per token. Built on the first call."""

  def __init__(self, combination: str, num_labels: int, lstm_units: int, dropout_rate: float,
               kernel_initializer, **kwargs):
    super().__init__(**kwargs)
    self.combination = combination
    self.mix = ScalarMix(name="scalar_mix") if combination == "sum" else None
    self.lstms = [tf_keras.layers.Bidirectional(tf_keras.layers.LSTM(lstm_units,
                                                                     return_sequences=True),
                                                name=f"bilstm_{i}") for i in range(2)]
    self.dropout = tf_keras.layers.Dropout(dropout_rate)
    self.classifier = tf_keras.layers.Dense(num_labels, kernel_initializer=kernel_initializer,
                                            name="logits")
    self._head_config = dict(
        combination=combination, num_labels=num_labels, lstm_units=lstm_units,
        dropout_rate=dropout_rate,
        kernel_initializer=tf_keras.initializers.serialize(kernel_initializer))

  def combine(self, states: list[tf.Tensor]) -> tf.Tensor:
    """N float [batch, seq, H] (one per layer) -> the BiLSTM's input: [batch, seq, N * H]
    for "concat", else [batch, seq, H]."""
    states = [tf.cast(h, self.compute_dtype) for h in states]
    if self.combination == "concat":
      return tf.concat(states, axis=-1)
    if self.mix is not None:
      return self.mix(states)
    [state] = states
    return state

  def call(self, states: list[tf.Tensor], input_mask: tf.Tensor, training=None) -> tf.Tensor:
    """N float [batch, seq, H] (one per layer), input_mask [batch, seq] ->
    logits [batch, seq, num_labels]."""
    x = self.combine(states)
    mask = tf.cast(input_mask, tf.bool)
    for lstm in self.lstms:
      x = lstm(x, mask=mask, training=training)
    return self.classifier(self.dropout(x, training=training))

  def get_config(self) -> dict:
    return dict(super().get_config(), **self._head_config)


class FeatureBasedTagger(tf_keras.Model):
  """The paper's feature-based NER: a frozen encoder's hidden states of chosen layers into a
  FeatureBasedHead. {input_word_ids, input_mask, input_type_ids} int [batch, seq] ->
  {"logits": float [batch, seq, num_labels]}, as BertTokenClassifier's.

  The encoder is non-trainable (its weights are not among trainable_variables, so the
  training loop neither computes nor applies gradients for them) and runs with dropout off;
  `checkpoint_items["encoder"]` is where --init_checkpoint loads."""

  def __init__(self, encoder: tf_keras.Model, layers: tuple[int, ...],
               head: FeatureBasedHead, **kwargs):
    super().__init__(**kwargs)
    self.encoder = encoder
    self.encoder.trainable = False
    self.layer_indices = tuple(layers)
    # Not tracked (a plain object): its model is the encoder's own layers.
    self.extractor = FeatureExtractor(encoder, layers)
    self.head = head

  @property
  def checkpoint_items(self) -> dict:
    return {"encoder": self.encoder}

  def get_config(self) -> dict:
    """For the SavedModel's Keras metadata; the model is rebuilt by `build_model`, not from it."""
    return {"layers": list(self.layer_indices), "name": self.name}

  def hidden_states(self, inputs: dict) -> list[tf.Tensor]:
    """The frozen features: per layer of `layer_indices`, float32 [batch, seq, H]."""
    ids = [tf.cast(inputs[name], tf.int32) for name in INPUT_NAMES]
    return [tf.stop_gradient(h) for h in self.extractor.hidden_states(*ids)]

  def call(self, inputs: dict, training=None) -> dict:
    return {"logits": self.head(self.hidden_states(inputs), inputs["input_mask"],
                                training=training)}


@register
class NerTask(FineTuningTask):
  """CoNLL-2003-style NER from data_dir's train.txt, dev.txt and test.txt."""
  config_class = NerConfig
  primary_metric = "f1"
  hf_architecture = "BertForTokenClassification"  # Fine-tuning's; not the feature-based one.
  loss_per_token = True  # Random training batches, each cut (see FineTuningTask).
  example_noun = "sentences"
  label_noun = "tags"

  def __init__(self, config: NerConfig, data_dir: str | None = None):
    super().__init__(config, data_dir)
    self._examples = {}  # split -> its sentences, read once.

  @classmethod
  def data_settings(cls, settings: dict, data_dir: str = "") -> dict:
    """The labels of train.txt and, for scheme "auto" (the default), the scheme it follows."""
    # The settings' own errors (a flag) before the data's.
    NerConfig(**{k: v for k, v in settings.items() if k not in ("labels", "scheme")})
    path = os.path.join(data_dir, FILES["train"])
    train = read_conll(path)
    if not train:
      raise DataError(f"{path}: no sentences (the label set is the training file's tags)")
    return {"labels": label_list(train),
            "scheme": check_scheme(path, train, settings.get("scheme", "auto"))}

  # Examples.
  def splits(self, mode: str) -> list[str]:
    return {"train": ["train"], "eval": ["dev"], "predict": ["test"]}[mode]

  def split_file(self, split: str) -> str:
    return os.path.join(self.data_dir or "", FILES[split])

  def read_examples(self, split: str) -> list[Sentence]:
    """The split's sentences, checked against the task's scheme; tags outside the label set
    (a type the training file lacks) are warned about: never predicted, they score as
    misses."""
    if split not in self._examples:
      path = self.split_file(split)
      sentences = read_conll(path)
      check_scheme(path, sentences, self.config.scheme)
      self._warn_unknown_tags(path, sentences)
      self._examples[split] = sentences
    return self._examples[split]

  def _warn_unknown_tags(self, path: str, sentences: list[Sentence]) -> None:
    known = set(self.config.labels)
    unknown = [(s.line + i, t) for s in sentences for i, t in enumerate(s.tags)
               if t not in known]
    if unknown:
      tags = sorted({t for _, t in unknown})
      logging.warning("%s:%d: tag %s is not in the training file's label set (%d words with "
                      "tags %s): never predicted, they count as misses", path, unknown[0][0],
                      unknown[0][1], len(unknown), ", ".join(tags))

  def transfer_examples(self, path: str) -> list[Sentence]:
    """`path` read as test.txt (a word a line, a blank line between sentences), its tags, if
    any, not read: the teacher tags its words (`read_conll`, not tagged)."""
    return read_conll(path, tagged=False)

  # Features and records.
  def convert_examples(self, examples: list[Sentence], tokenizer: FullTokenizer,
                       is_training: bool) -> Features:
    """A feature per run of words (see `_spans`) of each sentence, in order, with the context
    `_context` gives it. Prediction features carry their words' positions (`NerFeature`);
    their words' label ids are those of the tags (and of their continuation tags at later
    basic tokens), -1 for a tag outside the label set."""
    word_ids = _word_ids(examples, tokenizer)
    label_ids = {t: i for i, t in enumerate(self.config.labels)}
    room = self.config.max_seq_length - 2
    records, example_index, extras = [], [], []
    for unit in _units(examples, self.config.document_context):
      pieces = [word_ids[w] for i in unit for w in examples[i].words]
      lengths = np.array([len(p) for p in pieces], np.int64)
      ids, first = np.concatenate(pieces), np.cumsum(lengths) - lengths
      # The unit's pieces that start a later basic token of their word, and that word.
      later = np.flatnonzero(~tokenizer.is_continuation[ids])
      later = later[~np.isin(later, first)]
      later_word = np.searchsorted(first, later, side="right") - 1
      word = 0  # The unit's index of the sentence's first word.
      for index in unit:
        sentence = examples[index]
        count = len(sentence.words)
        for a, b in _spans(lengths[word:word + count], room):
          start = first[word + a]
          end = min(first[word + b - 1] + lengths[word + b - 1], start + room)
          begin, stop = _context(start, end, len(ids), room)
          positions = first[word + a:word + b] - begin + 1  # After [CLS].
          labels = [label_ids.get(t, IGNORED) for t in sentence.tags[a:b]]
          inside = (later_word >= word + a) & (later_word < word + b) & (later < end)
          labelled = np.concatenate([positions, later[inside] - begin + 1])
          labels += [label_ids.get(continuation(sentence.tags[w - word]), IGNORED)
                     for w in later_word[inside].tolist()]
          records.append(self._record(tokenizer, ids[begin:stop], labelled, labels))
          example_index.append(index)
          extras.append(NerFeature(a, positions))
        word += count
    return Features(records, np.array(example_index, np.int64),
                    None if is_training else extras)

  def _record(self, tokenizer: FullTokenizer, window: np.ndarray, positions: np.ndarray,
              labels: list[int]) -> dict:
    """input_ids, input_mask, segment_ids, label_ids int64 [max_seq_length]:
    [CLS] window [SEP], zero-padded, one segment; labels at `positions`, -1 elsewhere."""
    seq = self.config.max_seq_length
    input_ids = np.full(seq, tokenizer.pad_id, np.int64)
    input_ids[:len(window) + 2] = np.concatenate([[tokenizer.cls_id], window,
                                                  [tokenizer.sep_id]])
    label_ids = np.full(seq, IGNORED, np.int64)
    label_ids[positions] = labels
    return {"input_ids": input_ids,
            "input_mask": (np.arange(seq) < len(window) + 2).astype(np.int64),
            "segment_ids": np.zeros(seq, np.int64), "label_ids": label_ids}

  def record_layout(self, is_training: bool) -> list[schema.Feature]:
    return schema.token_classification_features(self.config.max_seq_length)

  # Model and loss.
  def build_model(self, bert_config: BertConfig) -> tf_keras.Model:
    """BertTokenClassifier, or with `feature_based` a FeatureBasedTagger: {input_word_ids,
    input_mask, input_type_ids} int32 [batch, seq] -> {"logits": [batch, seq, num_labels]};
    dropout of the encoder's hidden_dropout_prob before the output layer, drawn as the
    encoder's weights; the encoder is checkpoint_items["encoder"]."""
    config = self.config
    if config.feature_based:
      layers = feature_layers(config.feature_based, bert_config.num_hidden_layers)
      head = FeatureBasedHead(FEATURE_BASED[config.feature_based][1], len(config.labels),
                              config.lstm_units, bert_config.hidden_dropout_prob,
                              initializer(bert_config), name="feature_based_head")
      model = FeatureBasedTagger(build_encoder(bert_config), layers, head,
                                 name="feature_based_tagger")
    else:
      model = models.BertTokenClassifier(
          build_encoder(bert_config), len(config.labels),
          initializer=initializer(bert_config), dropout_rate=bert_config.hidden_dropout_prob,
          name="bert_token_classifier")
    return create_variables(model)

  def loss_counts(self, features: dict) -> dict[str, tf.Tensor]:
    return {"labelled tokens": tf.reduce_sum(tf.cast(features["label_ids"] >= 0, tf.float32))}

  def loss(self, features: dict, outputs, counts=None) -> tuple[tf.Tensor, dict]:
    """Mean cross-entropy over the labelled positions (label id >= 0), and the accuracy
    there; in float32 whatever the model computes in. Over the batch's own labelled tokens,
    or the update's (`counts`): NER's per-token loss stays exact across micro-batches."""
    logits = tf.cast(outputs["logits"], tf.float32)
    labels = features["label_ids"]
    weights = tf.cast(labels >= 0, tf.float32)
    count = (counts or self.loss_counts(features))["labelled tokens"]
    xent = tf.nn.sparse_softmax_cross_entropy_with_logits(tf.maximum(labels, 0), logits)
    hits = tf.cast(tf.equal(tf.argmax(logits, -1, output_type=labels.dtype), labels), tf.float32)
    return (tf.math.divide_no_nan(tf.reduce_sum(xent * weights), count),
            {"accuracy": tf.math.divide_no_nan(tf.reduce_sum(hits * weights), count)})

  def soft_targets(self, features: dict, outputs) -> dict[str, SoftTarget]:
    """The teacher's softmax over the tags at each position the loss counts (a word's first
    piece), over the update's labelled tokens as the loss."""
    return {"logits": SoftTarget("tokens", outputs["logits"],
                                 weights=features["label_ids"] >= 0, count="labelled tokens")}

  def predict_outputs(self, features: dict, outputs) -> dict[str, tf.Tensor]:
    """The label id with the highest logit, int32 [batch, max_seq_length] (a batch cut
    shorter padded back with 0, so that batches concatenate): all post-processing reads."""
    ids = tf.argmax(outputs["logits"], -1, output_type=tf.int32)
    padding = self.config.max_seq_length - tf.shape(ids)[1]
    return {"label_ids": tf.pad(ids, [[0, 0], [0, padding]])}

  # Predictions, metrics and files.
  def postprocess(self, examples: list[Sentence], features: Features,
                  outputs: dict[str, np.ndarray]) -> list[list[str]]:
    """Each sentence's predicted tags (one per word), from its features' first pieces."""
    tags = [[None] * len(s.words) for s in examples]
    for feature, index, predicted in zip(features.extras, features.example_index,
                                         outputs["label_ids"]):
      ids = predicted[feature.positions].tolist()
      tags[index][feature.first_word:feature.first_word + len(ids)] = [
          self.config.labels[i] for i in ids]
    return tags

  def evaluate(self, examples: list[Sentence], predictions: list[list[str]]) -> dict[str, float]:
    """conlleval's scores of the predictions (see `ConllScores.metrics`)."""
    return ConllScores.of(examples, predictions).metrics()

  def write_predictions(self, output_dir: str, split: str, examples: list[Sentence],
                        predictions: list[list[str]]) -> list[str]:
    """predictions.txt (`word gold predicted` lines, as conlleval reads them) and
    conlleval_results.txt (conlleval's report of it)."""
    del split  # One predict split.
    lines = []
    for sentence, predicted in zip(examples, predictions):
      if sentence.doc_start:
        lines += [f"{DOCSTART} O O", ""]
      # conlleval splits lines at spaces: a `word<TAB>tag` file's word may hold some.
      lines += [f"{w.replace(' ', '_')} {g} {p}"
                for w, g, p in zip(sentence.words, sentence.tags, predicted)]
      lines.append("")
    paths = [os.path.join(output_dir, "predictions.txt"),
             os.path.join(output_dir, "conlleval_results.txt")]
    write_text(paths[0], "\n".join(lines) + "\n" if lines else "")
    write_text(paths[1], ConllScores.of(examples, predictions).report())
    return paths

  # Serving.
  def serving_module(self, model: tf_keras.Model, tokenizer: FullTokenizer) -> tf.Module:
    from bert_tf.tasks.ner import serving  # pylint: disable=g-import-not-at-top
    return serving.NerServing(model, tokenizer, self.config)

  def warmup_inputs(self, examples: list[Sentence] | None = None) -> list[dict[str, str]]:
    """{text} of the first 3 sentences (words joined by spaces), else of built-in samples."""
    if examples:
      return [{"text": " ".join(s.words)} for s in examples[:3]]
    return [{"text": t} for t in SAMPLE_TEXTS]


@dataclasses.dataclass
class ConllScores:
  """conlleval's counts over a split: tokens, correctly tagged tokens, and per entity type
  (gold entities, predicted entities, correct ones)."""
  tokens: int
  correct_tags: int
  counts: dict[str, tuple[int, int, int]]

  @classmethod
  def of(cls, examples: list[Sentence], predictions: list[list[str]]) -> "ConllScores":
    """The counts conlleval makes of write_predictions' file: entities as seqeval's default
    mode (conlleval's rules) reads them, and each -DOCSTART- line a token tagged O and O."""
    gold, guess = [], []
    for sentence, predicted in zip(examples, predictions):
      if sentence.doc_start:
        gold.append(["O"])
        guess.append(["O"])
      gold.append(sentence.tags)
      guess.append(predicted)
    true_entities, found_entities = set(get_entities(gold)), set(get_entities(guess))
    counts = collections.defaultdict(lambda: [0, 0, 0])
    for entity in true_entities:
      counts[entity[0]][0] += 1
    for entity in found_entities:
      counts[entity[0]][1] += 1
      counts[entity[0]][2] += entity in true_entities
    flat_gold = [t for tags in gold for t in tags]
    flat_guess = [t for tags in guess for t in tags]
    return cls(len(flat_gold), sum(g == p for g, p in zip(flat_gold, flat_guess)),
               {k: tuple(v) for k, v in sorted(counts.items())})

  @staticmethod
  def _prf(gold: int, found: int, correct: int) -> tuple[float, float, float]:
    """conlleval's precision, recall and FB1, in percent (0 where undefined)."""
    precision = 100 * correct / found if found else 0.0
    recall = 100 * correct / gold if gold else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return precision, recall, f1

  def totals(self) -> tuple[int, int, int]:
    return tuple(int(sum(c[i] for c in self.counts.values())) for i in range(3))

  def metrics(self) -> dict[str, float]:
    """precision, recall, f1, accuracy, and precision_<TYPE>, recall_<TYPE>, f1_<TYPE> for
    every type of the gold or the predicted tags; all in percent."""
    precision, recall, f1 = self._prf(*self.totals())
    out = {"precision": precision, "recall": recall, "f1": f1,
           "accuracy": 100 * self.correct_tags / self.tokens if self.tokens else 0.0}
    for name, counts in self.counts.items():
      for key, value in zip(("precision", "recall", "f1"), self._prf(*counts)):
        out[f"{key}_{name}"] = value
    return out

  def report(self) -> str:
    """conlleval's report, line for line."""
    gold, found, correct = self.totals()
    lines = [f"processed {self.tokens} tokens with {gold} phrases; found: {found} phrases; "
             f"correct: {correct}."]
    if self.tokens:
      precision, recall, f1 = self._prf(gold, found, correct)
      lines.append(f"accuracy: {100 * self.correct_tags / self.tokens:6.2f}%; precision: "
                   f"{precision:6.2f}%; recall: {recall:6.2f}%; FB1: {f1:6.2f}")
    for name, counts in self.counts.items():
      precision, recall, f1 = self._prf(*counts)
      lines.append(f"{name:>17}: precision: {precision:6.2f}%; recall: {recall:6.2f}%; "
                   f"FB1: {f1:6.2f}  {counts[1]}")
    return "\n".join(lines) + "\n"
