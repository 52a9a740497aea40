"""Any checkpoint `--init_checkpoint` reads as TF Hub's two BERT SavedModels (the encoder and
its preprocessor), in the convention of tensorflow/hub's common_saved_model_apis/text.md that
the Model Garden's official/nlp/tools/export_tfhub_lib.py writes:

    export_dir/encoder/        a Reusable SavedModel (tf_keras):
      obj({input_word_ids, input_mask, input_type_ids}: int32 [batch, seq], training=bool)
        -> pooled_output [batch, H], default (= pooled_output), sequence_output [batch, seq, H],
           encoder_outputs (a list of L [batch, seq, H]);
      obj.mlm({... the three, masked_lm_positions: int32 [batch, P]}) -> the same and
        mlm_logits [batch, P, vocab], when the checkpoint holds the masked-LM head;
      obj.vocab_file (asset), obj.do_lower_case (variable), obj.variables,
      obj.trainable_variables; a serving_default signature on the three inputs, answering
      pooled_output, default, sequence_output and encoder_outputs_<i> (i = 0 .. L-1).
    export_dir/preprocessor/   text -> those inputs, with this project's tokenizer:
      obj(sentences: string [batch]) -> the three, int32 [batch, seq_length] (also as the
        serving_default signature);
      obj.tokenize(sentences) -> int32 [batch, (words), (pieces)];
      obj.tokenize.get_special_tokens_dict() -> {vocab_size, start_of_sequence_id,
        end_of_segment_id, padding_id, mask_id}: int32 scalars;
      obj.bert_pack_inputs([segment, ...], seq_length=seq_length) -> the three: one or two
        segments, each [batch, (pieces)] or [batch, (words), (pieces)], trimmed round-robin.

`tensorflow_hub.KerasLayer` loads both (the encoder with trainable=True to fine-tune it).
`bert_tf.modeling.checkpoints` reads such an encoder back as an --init_checkpoint.
"""
import os

import tensorflow as tf
import tf_keras
from absl import logging
from official.nlp.modeling import layers

from bert_tf.common import files
from bert_tf.modeling import checkpoints
from bert_tf.modeling import pretrainer as pretrainer_lib
from bert_tf.modeling.encoder import INPUT_NAMES
from bert_tf.finetuning.inputs import ids_signature
from bert_tf.tokenization import FullTokenizer

ENCODER, PREPROCESSOR = "encoder", "preprocessor"


def encoder_model(pretrainer: pretrainer_lib.BertPretrainer, with_mlm: bool) -> tf_keras.Model:
  """The Hub encoder on `pretrainer`'s encoder (and, with_mlm, its masked-LM head as `.mlm`):
  a functional tf_keras Model, so that tf_keras saves its call with and without training
  (what a Reusable SavedModel is called with) and its variable lists."""
  inputs = {name: tf_keras.Input(shape=(None,), dtype=tf.int32, name=name)
            for name in INPUT_NAMES}
  encoded = dict(pretrainer.encoder(inputs))
  # `default`: the alias every TF Hub text embedding has for the whole input's representation.
  core = tf_keras.Model(inputs, dict(encoded, default=encoded["pooled_output"]))
  if with_mlm:
    positions = tf_keras.Input(shape=(None,), dtype=tf.int32, name="masked_lm_positions")
    logits = pretrainer.masked_lm(encoded["sequence_output"], masked_positions=positions)
    mlm = tf_keras.Model(dict(inputs, masked_lm_positions=positions),
                         dict(encoded, mlm_logits=logits))
    # As the Model Garden's exporter: a sub-object, not a sub-layer, so that the encoder's
    # variables (which a KerasLayer fine-tunes) are not joined by the head's.
    core._auto_track_sub_layers = False  # pylint: disable=protected-access
    core.mlm = mlm
  return core


def serving_signature(encoder: tf_keras.Model):
  """The encoder's serving_default: the three inputs -> its outputs named (tf_keras's own
  signature would name them after the encoder's layer, bert_encoder_1 ... _<L+2>)."""
  def named(outputs: dict) -> dict:
    layers_out = outputs.pop("encoder_outputs")
    return dict(outputs, **{f"encoder_outputs_{i}": x for i, x in enumerate(layers_out)})
  return ids_signature(lambda ids: named(dict(encoder(ids, training=False))),
                       [None, None])


class _SpecialTokens(tf.Module):
  """tokenize.get_special_tokens_dict(): the ids bert_pack_inputs and the MLM need."""

  def __init__(self, tokenizer: FullTokenizer):
    super().__init__()
    self._ids = dict(vocab_size=len(tokenizer.vocab), start_of_sequence_id=tokenizer.cls_id,
                     end_of_segment_id=tokenizer.sep_id, padding_id=tokenizer.pad_id,
                     mask_id=tokenizer.mask_id)

  @tf.function(input_signature=[])
  def __call__(self):
    return {name: tf.constant(value, tf.int32) for name, value in self._ids.items()}


class _Tokenize(tf.Module):
  """The preprocessor's `tokenize`: the project's tokenizer, word by word."""

  def __init__(self, tokenizer: FullTokenizer):
    super().__init__()
    self.tokenizer = tokenizer.module  # Carries vocab_file (an asset) and do_lower_case.
    self.get_special_tokens_dict = _SpecialTokens(tokenizer)

  @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
  def __call__(self, sentences):
    """string [batch] -> int32 [batch, (words), (pieces)]."""
    return self.tokenizer.word_pieces(sentences)


class _PackInputs(tf.Module):
  """The preprocessor's `bert_pack_inputs`: the Model Garden's BertPackInputs with the
  sequence length an argument (defaulting to the export's), traced for one or two segments of
  either ragged rank, as a SavedModel can serve only the traced ones."""

  def __init__(self, tokenizer: FullTokenizer, seq_length: int):
    super().__init__()
    special_ids = dict(start_of_sequence_id=tokenizer.cls_id,
                       end_of_segment_id=tokenizer.sep_id, padding_id=tokenizer.pad_id)

    @tf.function(autograph=False)
    def pack(segments, seq_length=seq_length):
      """[segment, ...] int32 ragged [batch, ...] -> {INPUT_NAMES: int32 [batch, seq_length]}."""
      return layers.BertPackInputs.bert_pack_inputs(segments, seq_length, **special_ids)

    for ragged_rank in (1, 2):
      for num_segments in (1, 2):
        pack.get_concrete_function(
            [tf.RaggedTensorSpec([None] * (ragged_rank + 1), tf.int32)] * num_segments,
            seq_length=tf.TensorSpec([], tf.int32))
    self.__call__ = pack


class Preprocessor(tf.Module):
  """The preprocessor SavedModel's root (see the module doc)."""

  def __init__(self, tokenizer: FullTokenizer, seq_length: int):
    super().__init__()
    self.tokenize = _Tokenize(tokenizer)
    self.bert_pack_inputs = _PackInputs(tokenizer, seq_length)
    self.vocab_file = tokenizer.module.vocab_file
    self.do_lower_case = tokenizer.module.do_lower_case
    self._seq_length = seq_length

  @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="sentences")])
  def __call__(self, sentences):
    """string [batch] -> {INPUT_NAMES: int32 [batch, seq_length]}."""
    # bert_pack_inputs' call is an attribute (its default length is the export's), which the
    # call syntax does not look up on the Python object; the loaded one is callable.
    return self.bert_pack_inputs.__call__([self.tokenize(sentences)],
                                          tf.constant(self._seq_length))


def _check_new(path: str) -> None:
  if tf.io.gfile.exists(path):
    raise FileExistsError(f"{path} already exists; remove it or choose another --export_dir")


def export(init_checkpoint: str, export_dir: str, bert_config_file: str | None = None,
           vocab_file: str | None = None, do_lower_case: bool | None = None,
           seq_length: int = 128) -> dict[str, str]:
  """Writes `export_dir/encoder` and `export_dir/preprocessor` (each under a temporary name,
  renamed when complete) from any source `checkpoints.resolve` reads: ours, google-research
  TF1, Hugging Face or a TF Hub encoder; its config and vocab as `checkpoints.resolve_files`
  finds them, the casing the model states where do_lower_case is None (`FullTokenizer`). The
  masked-LM head goes along when the source has it.

  Args:
    seq_length: the preprocessor's sequence length when called on sentences (and the default
      of its bert_pack_inputs).

  Returns:
    {"encoder": path, "preprocessor": path}.
  """
  paths = {name: os.path.join(export_dir, name) for name in (ENCODER, PREPROCESSOR)}
  for path in paths.values():
    _check_new(path)
  config, vocab_file = checkpoints.resolve_files(bert_config_file, vocab_file, init_checkpoint,
                                                 seq_length)
  tokenizer = FullTokenizer(vocab_file, do_lower_case)
  # The smallest batch that builds its variables: the shapes are not saved with them.
  pretrainer = pretrainer_lib.build_pretrainer(config, 2, 1, nsp=False)
  parts = checkpoints.load_into_pretrainer(pretrainer, init_checkpoint)
  if "masked_lm" not in parts:
    logging.info("%s: no masked-LM head, so the encoder has no `mlm`", init_checkpoint)
  encoder = encoder_model(pretrainer, with_mlm="masked_lm" in parts)
  encoder.vocab_file = tokenizer.module.vocab_file
  encoder.do_lower_case = tokenizer.module.do_lower_case
  with files.temporary_path(paths[ENCODER]) as tmp:
    encoder.save(tmp, include_optimizer=False, save_format="tf",
                 signatures=serving_signature(encoder))
  preprocessor = Preprocessor(tokenizer, seq_length)
  with files.temporary_path(paths[PREPROCESSOR]) as tmp:
    tf.saved_model.save(preprocessor, tmp, signatures=preprocessor.__call__.get_concrete_function())
  return paths
