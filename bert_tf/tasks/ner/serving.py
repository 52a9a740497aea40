"""A token classifier (NER) served as entities: raw text in, entities out, every step in the TF
graph (a process that imports only tensorflow and tensorflow_text runs it).

Signature serving_default:
  text: tf.string [batch], a sentence or a whole document of any length
  -> entity_type: tf.string [batch, n], the entity's type ("PER" of B-PER/I-PER);
     entity_text: tf.string [batch, n], the entity as it stands in the text, from its first
       word's first character to its last word's last (the text's own whitespace kept);
     start, end: int32 [batch, n], the entity's offsets in the text in characters (Unicode code
       points, as Python indexes a str; end exclusive): text[start:end] == entity_text. As in
       squad_serving, a text that is not valid UTF-8 is read with each bad sequence replaced by
       U+FFFD, and the offsets count the characters of that text;
     num_entities: int32 [batch], how many of the n columns of each row are entities; the rest
       are padding ("" and -1). n is the batch's largest count (0 when no text has one);
     words, tags: tf.string [batch, w], each word's text and its predicted tag, padded with ""
       (for debugging: the words are what the model tagged).

The steps, on each text of the batch:
  1. Words are the reference BasicTokenizer's (the tokenizer's `split_words`): the text is split
     at whitespace and around punctuation and CJK characters into tokens with their offsets;
     each token is normalised and split into words as the tokenizer does (a token may hold
     several words, as x U+1FEF y does once NFD turns U+1FEF into "`"; or none, when all its
     characters are deleted, as U+200B). Each word is tokenized into wordpieces by the
     tokenizer's own graph, so the ids are the training features' ids.
  2. A word's characters are its own where its token's normalised words have as many characters
     as the raw token (accents stripped from precomposed letters keep the count); otherwise
     (deleted characters, letters NFD lengthens) every word of the token stands for the whole
     token, as squad_serving maps such pieces.
  3. The text's pieces are covered by windows [CLS] pieces [SEP] of max_seq_length - 2 pieces
     every half window, so a text of any length is tagged whole; the windows of the batch go
     through the model `windows_per_call` at a time. Each word's tag is the arg max of the
     logits at its first piece (its ##-pieces carry no label in training), in the window
     where that piece has the most context: SQuAD's rule (the original's _check_is_max_context,
     min(left, right) + 0.01 * window length; the first window wins a tie).
  4. Entities are decoded from the tags with conlleval's chunk rules (seqeval's default mode,
     its port): B-X starts an entity; I-X continues one of type X and starts one after O or
     another type. The rules read IOB1 and IOB2 alike: in IOB2 every entity begins at B-, in
     IOB1 at I- with B- only between two adjacent entities of a type; so the config's scheme
     needs no branch here.

Against the task's own predictions (ner.py): a sentence that fits one window, its words joined
by spaces, gets the tags the task predicts for it without document context. Elsewhere the two
differ by design: the task gives a sentence its document's neighbouring sentences, balanced
left and right; the signature knows no sentences and gives each piece its most central window.
And a CoNLL word that the tokenizer splits ("U.S.", "1996-08-22") is one word with one tag to
the task, several words here, each tagged: so training gives the first piece of each of its
later words the word's continuation tag (ner.py: I-LOC after B-LOC), and the model learns to
tag "U.S." u B-LOC, . I-LOC, s I-LOC, . I-LOC, one entity, where transformers'
token-classification pipeline, whose training leaves those words unlabelled, guesses.

Bad input still answers: an empty text or one of only whitespace or deleted characters (no
words, no entities), invalid UTF-8, a text of any length (100 kB of English news is ~17k words,
~18k pieces, 285 windows of 128). Memory is bounded by two calls of `windows_per_call` windows
for the model; the rest grows linearly with the batch's text, and so does the time.
"""
import numpy as np
import tensorflow as tf
import tf_keras

from bert_tf import tokenization
from bert_tf.finetuning import windows as windows_lib
from bert_tf.finetuning.inputs import SERVING_CHUNK, call_by_length
from bert_tf.tokenization import FullTokenizer

SIGNATURE = "serving_default"
NO_OFFSET = -1
# A tag's kind: outside any entity, beginning one, inside one.
OUTSIDE, BEGIN, INSIDE = 0, 1, 2


def _tag_kinds(labels: list[str]) -> tuple[np.ndarray, np.ndarray, list[str]]:
  """The labels' kinds and types, as the graph decodes them.

  Returns:
    kinds: int32 [num_labels], OUTSIDE, BEGIN or INSIDE.
    types: int32 [num_labels], the index of the label's type in `type_names` (-1 for "O").
    type_names: the entity types, sorted.

  Raises:
    ValueError: naming a label that is neither "O" nor "B-<type>" / "I-<type>".
  """
  for label in labels:
    if label != "O" and not (label[:2] in ("B-", "I-") and len(label) > 2):
      raise ValueError(f"label {label!r} is neither O nor B-<type> or I-<type>")
  type_names = sorted({label[2:] for label in labels if label != "O"})
  kinds = np.array([OUTSIDE if label == "O" else BEGIN if label[0] == "B" else INSIDE
                    for label in labels], np.int32)
  types = np.array([-1 if label == "O" else type_names.index(label[2:]) for label in labels],
                   np.int32)
  return kinds, types, type_names


def _global_chars(text: tf.Tensor) -> dict:
  """The batch's characters, numbered across the batch (text i's first character follows text
  i - 1's last).

  Returns:
    code_points: int32 [characters of the batch].
    row_starts: int64 [batch], each text's first character.
    byte: int64 [characters of the batch], each character's first byte, counted across the
      batch's texts laid end to end.
    text_byte: int64 [batch], each text's first byte in that count.
  """
  code_points, byte_starts = tf.strings.unicode_decode_with_offsets(text, "UTF-8")
  text_byte = tf.cumsum(tf.cast(tf.strings.length(text), tf.int64), exclusive=True)
  byte = byte_starts.flat_values + tf.gather(text_byte, byte_starts.value_rowids())
  return dict(code_points=code_points.flat_values, row_starts=code_points.row_starts(),
              byte=byte, text_byte=text_byte)


def _char_index(chars: dict, rows: tf.Tensor, byte_offsets: tf.Tensor) -> tf.Tensor:
  """int64 [n]: the character (numbered across the batch) at byte `byte_offsets` [n] of text
  `rows` [n]; a text's end gives the number after its last character."""
  byte = byte_offsets + tf.gather(chars["text_byte"], rows)
  return tf.searchsorted(chars["byte"][None], byte[None], side="left", out_type=tf.int64)[0]


def _slices(code_points: tf.Tensor, starts: tf.Tensor, ends: tf.Tensor) -> tf.Tensor:
  """tf.string [n]: the UTF-8 text of characters starts[i]:ends[i] of `code_points` (numbered
  across the batch). Copies only the slices, never a whole text per slice."""
  return tf.strings.unicode_encode(tf.gather(code_points, tf.ragged.range(starts, ends)),
                                   "UTF-8")


class NerServing(tf.Module):
  """A token classifier with its tokenizer and tags: what the SavedModel holds (see the module
  docstring for the signature).

  Tracked for saving: the Keras model and the tokenizer's TF module (its vocabulary becomes an
  asset); the labels and settings are constants of the graph.
  """

  def __init__(self, model: tf_keras.Model, tokenizer: FullTokenizer, config,
               windows_per_call: int = SERVING_CHUNK):
    """
    Args:
      model: an `official.nlp.modeling.models.BertTokenClassifier` (or any model taking the
        three int32 [batch, seq] inputs and returning logits [batch, seq, num_labels], or a
        dict holding them as "logits").
      tokenizer: the model's tokenizer.
      config: the task's settings: labels (the tags in label-id order), max_seq_length,
        do_lower_case.
      windows_per_call: the most windows the model runs on at once (bounds memory).
    """
    super().__init__(name="ner_serving")
    if config.max_seq_length < 3:
      raise ValueError(f"max_seq_length {config.max_seq_length} leaves no room for a piece "
                       "between [CLS] and [SEP]")
    if config.do_lower_case != tokenizer.do_lower_case:
      raise ValueError(f"do_lower_case {config.do_lower_case} differs from the tokenizer's")
    if windows_per_call < 1:
      raise ValueError(f"windows_per_call must be positive, not {windows_per_call}")
    self.model = model
    self.tokenizer = tokenizer.module
    self.cls_id, self.sep_id, self.pad_id = tokenizer.cls_id, tokenizer.sep_id, tokenizer.pad_id
    self.do_lower_case = tokenizer.do_lower_case
    self.max_seq_length = config.max_seq_length
    self.window_length = config.max_seq_length - 2
    # Half a window: each piece then has at least a quarter window of context on either side
    # in its best window (except near the text's ends).
    self.stride = max(self.window_length // 2, 1)
    self.windows_per_call = windows_per_call
    self.labels = list(config.labels)
    self.kinds, self.types, self.type_names = _tag_kinds(self.labels)

  def signatures(self) -> dict:
    """{"serving_default": concrete function} for `tf.saved_model.save`."""
    # Plain Python control flow only: AutoGraph would take ~10 s converting the model's code.
    serve = tf.function(lambda text: self.entities(text),
                        input_signature=[tf.TensorSpec([None], tf.string)], autograph=False)
    return {SIGNATURE: serve.get_concrete_function()}

  def entities(self, text: tf.Tensor) -> dict:
    """text: tf.string [batch] -> the signature's outputs (module docstring)."""
    text = tokenization.valid_utf8(text)
    chars = _global_chars(text)
    words = self.words(text, chars)
    windows = self.windows(words["pieces"])
    num_pieces = tf.size(words["pieces"].flat_values, out_type=tf.int64)
    best_window = windows_lib.best_window(windows["first"], windows["length"], num_pieces)
    tags = self.tags(windows, best_window, words["first_piece"])
    entities = self.decode(tags, words["row"], words["row_starts"])

    batch_size = tf.size(text, out_type=tf.int64)

    def per_text(values, rows, pad):
      """[batch, n] from the batch's values and their texts, padded."""
      return tf.RaggedTensor.from_value_rowids(values, rows, nrows=batch_size).to_tensor(pad)

    rows = entities["row"]
    start = tf.gather(words["start"], entities["first_word"])
    end = tf.gather(words["end"], entities["last_word"])
    row_start = tf.gather(chars["row_starts"], rows)
    return dict(
        entity_type=per_text(tf.gather(tf.constant(self.type_names, tf.string),
                                       entities["type"]), rows, ""),
        entity_text=per_text(_slices(chars["code_points"], start, end), rows, ""),
        start=per_text(tf.cast(start - row_start, tf.int32), rows, NO_OFFSET),
        end=per_text(tf.cast(end - row_start, tf.int32), rows, NO_OFFSET),
        num_entities=tf.math.bincount(tf.cast(rows, tf.int32), minlength=tf.size(text),
                                      maxlength=tf.size(text)),
        words=per_text(_slices(chars["code_points"], words["start"], words["end"]),
                       words["row"], ""),
        tags=per_text(tf.gather(tf.constant(self.labels, tf.string), tags), words["row"], ""))

  # The steps, in the order entities() runs them.

  def words(self, text: tf.Tensor, chars: dict) -> dict:
    """The texts' words, their wordpieces and their characters.

    Args:
      text: tf.string [batch], valid UTF-8.
      chars: `_global_chars(text)`.

    Returns (words and pieces numbered across the batch, in order):
      pieces: [batch, (pieces)] int32 wordpiece ids of each text.
      first_piece: int64 [words], each word's first piece among the batch's pieces.
      row: int64 [words], each word's text.
      row_starts: int64 [batch], each text's first word.
      start, end: int64 [words], the word's characters (numbered across the batch; end
        exclusive): its own where its token is aligned, else its token's (module docstring).
    """
    # regex_split_with_offsets ends a text at NUL; U+0001 has its length, and the tokenizer
    # deletes both alike. Lower-casing sigmas keeps every length too.
    split = tf.strings.regex_replace(text, r"\x00", "\x01")
    if self.do_lower_case:
      split = tokenization.lower_sigmas_in_context(split)
    tokens, begins, ends = tokenization.split_with_offsets(split)
    token_row = tokens.value_rowids()
    token_start = _char_index(chars, token_row, begins.flat_values)
    token_end = _char_index(chars, token_row, ends.flat_values)
    # Each word is normalised already; the tokenizer's graph normalises it again to no change.
    words = tokenization.split_words(tokens.flat_values, self.do_lower_case)  # [tokens, (words)]
    pieces = self.tokenizer(words.flat_values)  # [words, (pieces)]

    word_chars = tf.cast(tf.strings.length(words.flat_values, unit="UTF8_CHAR"), tf.int64)
    aligned = tf.equal(tf.reduce_sum(words.with_flat_values(word_chars), axis=1),
                       token_end - token_start)
    # Characters before each word within its token: a running sum restarted at each token.
    before = tf.cumsum(word_chars, exclusive=True)
    word_token = words.value_rowids()
    before -= tf.gather(tf.gather(tf.concat([before, [0]], 0), words.row_starts()), word_token)
    word_aligned = tf.gather(aligned, word_token)
    start = tf.gather(token_start, word_token) + tf.where(word_aligned, before, 0)
    end = tf.where(word_aligned, start + word_chars, tf.gather(token_end, word_token))

    text_words = tokens.with_flat_values(words).merge_dims(1, 2)  # [batch, (words)]
    return dict(pieces=text_words.with_flat_values(pieces).merge_dims(1, 2),
                first_piece=pieces.row_starts(), row=text_words.value_rowids(),
                row_starts=text_words.row_starts(), start=start, end=end)

  def windows(self, pieces: tf.RaggedTensor) -> dict:
    """The windows of every text: one at least (an empty text has one without pieces), then
    one more every `stride` pieces while the last ends before the text does.

    Args:
      pieces: [batch, (pieces)] int32.

    Returns (W = the number of windows of the batch, the windows of a text consecutive):
      inputs: the model's three int32 [W, max_seq_length] inputs.
      first: int64 [W], the index of the window's first piece among the batch's pieces.
      length: int64 [W], its number of pieces.
    """
    num_pieces = pieces.row_lengths()
    count = 1 + (tf.maximum(num_pieces - self.window_length, 0) + self.stride - 1) // self.stride
    row = tf.repeat(tf.range(tf.size(count, out_type=tf.int64)), count)
    start = tf.ragged.range(count).flat_values * self.stride
    length = tf.minimum(tf.cast(self.window_length, tf.int64), tf.gather(num_pieces, row) - start)
    first = tf.gather(pieces.row_starts(), row) + start
    window_pieces = tf.gather(pieces.flat_values, tf.ragged.range(first, first + length))
    column = lambda value: tf.RaggedTensor.from_tensor(tf.fill([tf.size(row), 1], value))
    ids = tf.concat([column(self.cls_id), window_pieces, column(self.sep_id)], axis=1)
    shape = [None, self.max_seq_length]
    word_ids = ids.to_tensor(self.pad_id, shape=shape)
    inputs = dict(input_word_ids=word_ids, input_mask=tf.ones_like(ids).to_tensor(0, shape=shape),
                  input_type_ids=tf.zeros_like(word_ids))
    return dict(inputs=inputs, first=first, length=length)

  def logits(self, inputs: dict) -> tf.Tensor:
    """The model's float32 logits [W, max_seq_length, num_labels] (0 past a window's pieces),
    `windows_per_call` windows at a time (one call after another, to bound memory), sorted by
    length, each call's cut to its longest (`inputs.call_by_length`)."""
    def call(chunk):
      outputs = self.model(chunk, training=False)
      return (outputs["logits"] if isinstance(outputs, dict) else outputs,)
    logits, = call_by_length(call, inputs, self.windows_per_call,
                             [[None, self.max_seq_length, len(self.labels)]], per_position=(True,))
    return logits

  def tags(self, windows: dict, best_window: tf.Tensor, first_piece: tf.Tensor) -> tf.Tensor:
    """int32 [words]: each word's label id, the arg max of its first piece's logits in the
    piece's best window."""
    window = tf.gather(best_window, first_piece)
    column = first_piece - tf.gather(windows["first"], window) + 1  # After [CLS].
    logits = tf.gather_nd(self.logits(windows["inputs"]), tf.stack([window, column], axis=1))
    return tf.argmax(logits, axis=-1, output_type=tf.int32)

  def decode(self, tags: tf.Tensor, row: tf.Tensor, row_starts: tf.Tensor) -> dict:
    """The entities of the batch's tags, with conlleval's chunk rules (module docstring).

    Args:
      tags: int32 [words], label ids.
      row: int64 [words], each word's text.
      row_starts: int64 [batch], each text's first word.

    Returns (E = the number of entities of the batch, in order):
      first_word, last_word: int64 [E], the entity's words (numbered across the batch).
      type: int32 [E], the index of its type in `type_names`.
      row: int64 [E], its text.
    """
    kind, type_ = tf.gather(self.kinds, tags), tf.gather(self.types, tags)
    word = tf.range(tf.size(tags, out_type=tf.int64))
    # The word before, as an "O" at the start of each text.
    first_in_text = tf.equal(word, tf.gather(row_starts, row))
    prev_kind = tf.where(first_in_text, OUTSIDE, tf.concat([[OUTSIDE], kind[:-1]], 0))
    prev_type = tf.where(first_in_text, -1, tf.concat([[-1], type_[:-1]], 0))
    starts = tf.equal(kind, BEGIN) | (tf.equal(kind, INSIDE) & (
        tf.equal(prev_kind, OUTSIDE) | tf.not_equal(prev_type, type_)))
    # The entity of each word in one (a text's first such word always starts one).
    entity = tf.where(tf.equal(kind, OUTSIDE), tf.constant(-1, tf.int64),
                      tf.cumsum(tf.cast(starts, tf.int64)) - 1)
    first_word = tf.where(starts)[:, 0]
    num_entities = tf.size(first_word, out_type=tf.int64)
    return dict(first_word=first_word,
                last_word=tf.math.unsorted_segment_max(word, entity, num_entities),
                type=tf.gather(type_, first_word), row=tf.gather(row, first_word))
