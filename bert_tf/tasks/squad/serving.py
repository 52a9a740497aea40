"""A SQuAD model served as answers: question and context in, the answer's text and offsets out,
every step in the TF graph (a process that imports only tensorflow and tensorflow_text runs it).

Signature serving_default:
  question, context: tf.string [batch]
  -> answer: tf.string [batch], a slice of the context ("" for no answer);
     start, end: int32 [batch], the answer's offsets in the context in characters (Unicode code
       points, as Python indexes a str; end exclusive): context[start:end] == answer. A context
       that is not valid UTF-8 is read with each bad sequence replaced by U+FFFD, and the
       offsets count the characters of that text. No answer: start = end = -1;
     score: float32 [batch], start logit + end logit of the answer span; for no answer, the
       no-answer score below (a SQuAD 1.1 model answers nothing only where the context has no
       wordpieces);
     no_answer_score: float32 [batch], version_2_with_negative models only: the minimum over the
       context's windows of start_logit[CLS] + end_logit[CLS].

The steps are google-research/bert's run_squad.py (and the Model Garden's squad_lib) at predict
time, on each example of the batch:
  1. The context is split into basic tokens with their offsets: at the tokenizer's whitespace,
     around its punctuation and CJK characters (kept as tokens). Each basic token is tokenized
     into wordpieces by the tokenizer's own graph, so the ids are the training features' ids.
     (The original splits at whitespace into doc_tokens first; the tokenizer's whitespace
     includes the reader's, so the pieces are the same.)
  2. The question's pieces are cut to max_query_length; the context's pieces are covered by
     windows of max_seq_length - len(question) - 3 pieces every doc_stride pieces, each packed
     as [CLS] question [SEP] passage [SEP]. Contexts of any length work: the windows of the
     whole batch go through the model `windows_per_call` at a time.
  3. A piece may start an answer only in the window where it has the most context (the
     original's _check_is_max_context; the end may be anywhere in that window's passage). The
     answer is the best span over all the example's windows: the maximum of start_logit[i] +
     end_logit[j] with i <= j < i + max_answer_length, both in the passage. It is the exact
     maximum over all such pairs; the original searches only the n_best_size best starts and
     ends of each window, so where its best pair is not among those it answers a worse span
     (or "empty" when none is: in a one-word context, say, with an untrained model).
  4. For version_2_with_negative models, the answer is "" when no_answer_score - the best
     span's score > null_score_diff_threshold.
  5. The text is the raw context from the start piece's first character to the end piece's
     last. As the original's get_final_text does, a piece maps to its own characters when its
     basic token's normalised text (lower-cased, accents stripped) has as many characters as the
     raw token; otherwise to the whole basic token. The original aligns the whole span instead,
     so one [UNK] or NFD-lengthened letter makes it answer all the span's whitespace words; it
     also looks for the span's normalised text from the start of its first word, and so may
     answer an earlier occurrence ("The" of "Then—suddenly—the" for the last "the"). Unlike
     the original, the text keeps the context's own whitespace between words, not one space.

Bad input still answers: an empty context or question, invalid UTF-8, a context of any length.
Memory is bounded by two model calls of `windows_per_call` windows (2 x 8 x 384 tokens for
BERT-Base: ~0.25 GB of activations); the rest grows linearly with the batch's text, and so does
the time (100 kB of SQuAD paragraphs are ~21k pieces, 164 windows of 384 at doc_stride 128).
"""
import numpy as np
import tensorflow as tf
import tf_keras

from bert_tf import tokenization
from bert_tf.finetuning import windows as windows_lib
from bert_tf.finetuning.inputs import SERVING_CHUNK, call_by_length
from bert_tf.tokenization import FullTokenizer

SIGNATURE = "serving_default"
NO_ANSWER_OFFSET = -1


class QuestionAnswerer(tf.Module):
  """A SQuAD span labeler with its tokenizer: what the SavedModel holds (see the module
  docstring for the signature).

  Tracked for saving: the Keras model and the tokenizer's TF module (its vocabulary becomes an
  asset); the settings are constants of the graph.
  """

  def __init__(self, model: tf_keras.Model, tokenizer: FullTokenizer, config,
               windows_per_call: int = SERVING_CHUNK):
    """
    Args:
      model: an `official.nlp.modeling.models.BertSpanLabeler` (or any model taking the three
        int32 [batch, seq] inputs and returning [start_logits, end_logits], [batch, seq]).
      tokenizer: the model's tokenizer.
      config: the task's settings: max_seq_length, doc_stride, max_query_length,
        max_answer_length, version_2_with_negative, null_score_diff_threshold, do_lower_case.
      windows_per_call: the most windows the model runs on at once (bounds memory).
    """
    super().__init__(name="question_answerer")
    if config.max_seq_length < config.max_query_length + 4:
      raise ValueError(f"max_seq_length {config.max_seq_length} leaves no room for the passage "
                       f"after max_query_length {config.max_query_length} + 3 special tokens")
    for name in ("doc_stride", "max_answer_length"):
      if getattr(config, name) < 1:
        raise ValueError(f"{name} must be positive, not {getattr(config, name)}")
    if config.do_lower_case != tokenizer.do_lower_case:
      raise ValueError(f"do_lower_case {config.do_lower_case} differs from the tokenizer's")
    self.model = model
    self.tokenizer = tokenizer.module
    self.cls_id, self.sep_id = tokenizer.cls_id, tokenizer.sep_id
    self.pad_id, self.unk_id = tokenizer.pad_id, tokenizer.unk_id
    self.do_lower_case = tokenizer.do_lower_case
    self.max_seq_length = config.max_seq_length
    self.doc_stride = config.doc_stride
    self.max_query_length = config.max_query_length
    # A span longer than a window's passage can never be valid.
    self.max_answer_length = min(config.max_answer_length, config.max_seq_length - 3)
    self.version_2_with_negative = bool(config.version_2_with_negative)
    self.null_score_diff_threshold = float(config.null_score_diff_threshold)
    if windows_per_call < 1:
      raise ValueError(f"windows_per_call must be positive, not {windows_per_call}")
    self.windows_per_call = windows_per_call
    # Each piece's length in characters in the normalised text ("##" not counted).
    self.piece_chars = np.array(
        [len(t) - 2 if t.startswith(tokenization.SUFFIX_INDICATOR) and len(t) > 2 else len(t)
         for t in tokenizer.inv_vocab], np.int64)

  def signatures(self) -> dict:
    """{"serving_default": concrete function} for `tf.saved_model.save`."""
    text = tf.TensorSpec([None], tf.string)
    # Plain Python control flow only: AutoGraph would take ~10 s converting the model's code.
    serve = tf.function(lambda question, context: self.answer(question, context),
                        input_signature=[text, text], autograph=False)
    return {SIGNATURE: serve.get_concrete_function()}

  def answer(self, question: tf.Tensor, context: tf.Tensor) -> dict:
    """question, context: tf.string [batch] -> the signature's outputs (module docstring)."""
    tf.debugging.assert_equal(tf.size(question), tf.size(context),
                              message="question and context differ in batch size")
    context = tokenization.valid_utf8(context)
    batch_size = tf.size(context, out_type=tf.int64)
    question_ids = self.tokenizer(question)[:, :self.max_query_length]
    doc = self.tokenize_context(context)
    windows = self.windows(question_ids, doc["ids"])
    is_max = self.max_context(windows, tf.size(doc["ids"].flat_values, out_type=tf.int64))
    start_logits, end_logits = self.logits(windows["inputs"])
    span = self.best_spans(windows, is_max, start_logits, end_logits, batch_size)

    has_answer = span["has_span"]
    if self.version_2_with_negative:
      # As the original subtracts: (null - start logit) - end logit, in float32.
      diff = span["null_score"] - span["start_logit"] - span["end_logit"]
      has_answer &= ~(diff > self.null_score_diff_threshold)
    start, end = self.char_offsets(context, doc, span["first_piece"], span["last_piece"],
                                   has_answer)
    outputs = dict(
        answer=tf.strings.substr(context, tf.maximum(start, 0), end - start, unit="UTF8_CHAR"),
        start=start, end=end,
        score=tf.where(has_answer, span["score"], span["null_score"]))
    if self.version_2_with_negative:
      outputs["no_answer_score"] = span["null_score"]
    return outputs

  # The steps, in the order answer() runs them.

  def tokenize_context(self, context: tf.Tensor) -> dict:
    """The context's basic tokens and wordpieces, with what maps pieces back to characters.

    Args:
      context: tf.string [batch], valid UTF-8.

    Returns:
      ids: [batch, (pieces)] int32 wordpiece ids of the context.
      piece_token: int64 [pieces of the batch], each piece's basic token (index into the flat
        tokens of the batch).
      piece_begin, piece_end: int64 [pieces of the batch], the piece's characters within its
        token where the token is aligned (see `aligned`).
      token_byte_begin: int64 [tokens of the batch], each token's first byte in its context.
      token_chars: int64 [tokens of the batch], each token's length in characters.
      aligned: bool [tokens of the batch], whether the token's normalised text has as many
        characters as the raw token (so that its pieces map to characters one to one).
    """
    # regex_split_with_offsets ends a text at NUL; U+0001 has its length, and the tokenizer
    # deletes both alike.
    context = tf.strings.regex_replace(context, r"\x00", "\x01")
    if self.do_lower_case:
      context = tokenization.lower_sigmas_in_context(context)
    tokens, begins, _ = tokenization.split_with_offsets(context)
    pieces = self.tokenizer(tokens.flat_values)  # [tokens of the batch, (pieces)]
    ids = pieces.flat_values
    chars = tf.gather(tf.constant(self.piece_chars), ids)
    token_chars = tf.strings.length(tokens.flat_values, unit="UTF8_CHAR", name="token_chars")
    token_chars = tf.cast(token_chars, tf.int64)
    is_unknown = tf.equal(ids, self.unk_id)
    aligned = (tf.equal(tf.reduce_sum(pieces.with_flat_values(chars), axis=1), token_chars)
               & ~tf.reduce_any(pieces.with_flat_values(is_unknown), axis=1))
    # Characters before each piece within its token: a running sum restarted at each token.
    before = tf.cumsum(tf.concat([chars, [0]], axis=0), exclusive=True)
    piece_token = pieces.value_rowids()
    piece_begin = before[:-1] - tf.gather(tf.gather(before, pieces.row_starts()), piece_token)
    return dict(ids=tokens.with_flat_values(pieces).merge_dims(1, 2),
                piece_token=piece_token, piece_begin=piece_begin, piece_end=piece_begin + chars,
                token_byte_begin=begins.flat_values, token_chars=token_chars, aligned=aligned)

  def windows(self, question_ids: tf.RaggedTensor, context_ids: tf.RaggedTensor) -> dict:
    """The windows of every example, as the original's doc_spans.

    Args:
      question_ids: [batch, (pieces)] int32, cut to max_query_length.
      context_ids: [batch, (pieces)] int32.

    Returns (W = the number of windows of the batch, the windows of an example consecutive):
      inputs: the model's three int32 [W, max_seq_length] inputs.
      example: int64 [W], each window's example.
      start: int64 [W], the index of the window's first piece among its context's pieces.
      first: int64 [W], the same among the batch's context pieces (`context_ids.flat_values`).
      length: int64 [W], its number of context pieces (0 only for a context without any).
      question_length: int64 [W], its example's number of question pieces.
    """
    question_length = question_ids.row_lengths()
    num_pieces = context_ids.row_lengths()
    max_doc = self.max_seq_length - 3 - question_length
    step = tf.minimum(max_doc, self.doc_stride)
    # One window more per step while the last one ends before the context does; one window
    # even for an empty context, so that every example has a no-answer score.
    count = 1 + (tf.maximum(num_pieces - max_doc, 0) + step - 1) // step
    example = tf.repeat(tf.range(tf.size(count, out_type=tf.int64)), count)
    start = tf.ragged.range(count).flat_values * tf.gather(step, example)
    length = tf.minimum(tf.gather(max_doc, example), tf.gather(num_pieces, example) - start)
    first = tf.gather(context_ids.row_starts(), example) + start
    passage = tf.gather(context_ids.flat_values, tf.ragged.range(first, first + length))
    question = tf.gather(question_ids, example)
    num_windows = tf.size(example)

    def column(value):
      return tf.RaggedTensor.from_tensor(tf.fill([num_windows, 1], value))

    cls, sep = column(self.cls_id), column(self.sep_id)
    ids = tf.concat([cls, question, sep, passage, sep], axis=1)
    type_ids = tf.concat([tf.zeros_like(cls), tf.zeros_like(question), tf.zeros_like(sep),
                          tf.ones_like(passage), tf.ones_like(sep)], axis=1)
    shape = [None, self.max_seq_length]
    inputs = dict(input_word_ids=ids.to_tensor(self.pad_id, shape=shape),
                  input_mask=tf.ones_like(ids).to_tensor(0, shape=shape),
                  input_type_ids=type_ids.to_tensor(0, shape=shape))
    return dict(inputs=inputs, example=example, start=start, first=first, length=length,
                question_length=tf.gather(question_length, example))

  def max_context(self, windows: dict, num_pieces: tf.Tensor) -> tf.Tensor:
    """Whether each passage piece of each window is in the window where it has the most
    context (`windows.best_window`): bool [W, max_seq_length - 3], False past the passage.

    Args:
      windows: from `windows`.
      num_pieces: the number of context pieces in the batch.
    """
    first, length = windows["first"], windows["length"]
    best = windows_lib.best_window(first, length, num_pieces)
    piece = tf.ragged.range(first, first + length)  # [W, (length)], the batch's pieces.
    is_max = piece.with_flat_values(tf.equal(piece.value_rowids(),
                                             tf.gather(best, piece.flat_values)))
    return is_max.to_tensor(False, shape=[None, self.max_seq_length - 3])

  def logits(self, inputs: dict) -> tuple[tf.Tensor, tf.Tensor]:
    """The model's float32 start and end logits [W, max_seq_length] (0 past a window's
    pieces), `windows_per_call` windows at a time (one call after another, to bound memory),
    sorted by length, each call's cut to its longest (`inputs.call_by_length`)."""
    shape = [None, self.max_seq_length]
    return call_by_length(lambda chunk: self.model(chunk, training=False), inputs,
                          self.windows_per_call, [shape, shape], per_position=(True, True))

  def best_spans(self, windows: dict, is_max: tf.Tensor, start_logits: tf.Tensor,
                 end_logits: tf.Tensor, batch_size: tf.Tensor) -> dict:
    """Each example's best span over its windows.

    Returns:
      has_span: bool [batch], whether the example has any valid span.
      score: float32 [batch], start + end logit of the best span.
      start_logit, end_logit: float32 [batch], the span's two logits.
      first_piece, last_piece: int64 [batch], the span's pieces among the batch's context
        pieces (clipped into range where there is no span).
      null_score: float32 [batch], the minimum over windows of the [CLS] logits' sum.
    """
    passage_length = self.max_seq_length - 3
    span_length = self.max_answer_length
    # The passage's logits: window position question_length + 2 + i -> column i.
    i = tf.range(passage_length, dtype=tf.int64)
    position = tf.minimum(windows["question_length"][:, None] + 2 + i, self.max_seq_length - 1)
    in_passage = i[None, :] < windows["length"][:, None]
    minus_inf = tf.constant(-np.inf, tf.float32)
    starts = tf.where(is_max, tf.gather(start_logits, position, batch_dims=1), minus_inf)
    ends = tf.where(in_passage, tf.gather(end_logits, position, batch_dims=1), minus_inf)
    # scores[w, i, d]: the span from i to i + d.
    ends = tf.pad(ends, [[0, 0], [0, span_length - 1]], constant_values=-np.inf)
    ends = tf.signal.frame(ends, span_length, 1, axis=1)  # [W, passage, span_length]
    scores = tf.reshape(starts[:, :, None] + ends, [-1, passage_length * span_length])
    # unsorted_segment_max starts from the lowest float, not -inf: so do windows without spans.
    window_best = tf.maximum(tf.reduce_max(scores, axis=1), tf.float32.min)
    window_arg = tf.argmax(scores, axis=1)

    example = windows["example"]
    best = tf.math.unsorted_segment_max(window_best, example, batch_size)
    num_windows = tf.size(example, out_type=tf.int64)
    # The first window that holds the example's best span.
    window = tf.math.unsorted_segment_min(
        tf.where(tf.equal(window_best, tf.gather(best, example)),
                 tf.range(num_windows), num_windows), example, batch_size)
    arg = tf.gather(window_arg, window)
    i, d = arg // span_length, arg % span_length
    column = tf.gather(windows["question_length"], window) + 2 + i
    first = tf.gather(windows["first"], window) + i
    return dict(
        has_span=best > tf.float32.min, score=best, first_piece=first, last_piece=first + d,
        start_logit=tf.gather(tf.gather(start_logits, window), column, batch_dims=1),
        end_logit=tf.gather(tf.gather(end_logits, window), column + d, batch_dims=1),
        null_score=tf.math.unsorted_segment_min(start_logits[:, 0] + end_logits[:, 0],
                                                example, batch_size))

  def char_offsets(self, context: tf.Tensor, doc: dict, first_piece: tf.Tensor,
                   last_piece: tf.Tensor, has_answer: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """The answer's offsets in characters, int32 [batch] (-1 where there is no answer): from
    the first piece's first character to the last piece's last (exclusive); a piece of a
    token that is not aligned stands for the whole token."""
    # Each array gets one more element, where examples without an answer point.
    padded = lambda values, pad: tf.concat([values, [pad]], axis=0)
    num_pieces = tf.size(doc["piece_token"], out_type=tf.int64)
    piece_token = padded(doc["piece_token"], tf.size(doc["token_chars"], out_type=tf.int64))
    first_piece = tf.where(has_answer, first_piece, num_pieces)
    last_piece = tf.where(has_answer, last_piece, num_pieces)

    def offset(pieces, piece_offsets, token_offsets):
      """Where `pieces` begin or end in their context, in characters."""
      token = tf.gather(piece_token, pieces)
      byte = tf.gather(padded(doc["token_byte_begin"], 0), token)
      token_start = tf.strings.length(tf.strings.substr(context, tf.zeros_like(byte), byte),
                                      unit="UTF8_CHAR")
      aligned = tf.gather(padded(doc["aligned"], False), token)
      return tf.cast(token_start, tf.int64) + tf.where(
          aligned, tf.gather(padded(piece_offsets, 0), pieces),
          tf.gather(padded(token_offsets, 0), token))

    start = offset(first_piece, doc["piece_begin"], tf.zeros_like(doc["token_chars"]))
    end = offset(last_piece, doc["piece_end"], doc["token_chars"])
    start = tf.where(has_answer, start, NO_ANSWER_OFFSET)
    end = tf.where(has_answer, end, NO_ANSWER_OFFSET)
    return tf.cast(start, tf.int32), tf.cast(end, tf.int32)
