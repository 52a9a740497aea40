"""The peer's sentence splitter: Punkt, either pretrained (--pretrained: nupunkt's shipped
English model, the stand-in for NLTK's pretrained `sent_tokenize` model, which is a download, not
a package) or NLTK's PunktTrainer trained on the text given.

Kind: the peer's side (benchmarks/peers/), in a venv of its own with nupunkt (--pretrained) or
nltk:
  python3.11 -m venv /tmp/corpusvenv && /tmp/corpusvenv/bin/pip install nltk nupunkt \
      wikiextractor==3.1.0

With --pretrained it loads the shipped model, as NVIDIA's and MLPerf's scripts call NLTK's
pretrained `sent_tokenize` (benchmarks/peers/corpus_compare.py); else it trains on --train_file
(any UTF-8 text; default: --input_file's paragraphs). Then it does what the flags ask, and prints
one JSON line:
  --golden_rules=PATH   pySBD's English Golden Rules: rules passed exactly, failed rule numbers
  --time_file=F         splits each line of F (one paragraph a line), timed: MB per CPU s
                        (benchmarks/splitter_eval.py's speed)
  --input_file/--output_file  WikiExtractor's output (`<doc ...>` blocks, the title the first
                        line) -> one sentence a line, a blank line between documents (the
                        pipeline NVIDIA's and MLPerf's BERT use: benchmarks/peers/corpus_compare.py)

  PYTHONPATH=. /tmp/corpusvenv/bin/python benchmarks/peers/punkt_peer.py \
      --train_file=paragraphs.txt --golden_rules=$BERT_TF_DATA/sentences/english_golden_rules.py
"""
import argparse
import json
import time

from benchmarks import splitter_eval  # the Golden Rules, and the speed on paragraphs


def train(text: str):
  """An NLTK PunktSentenceTokenizer trained on `text`."""
  # Only this mode needs nltk.
  from nltk.tokenize import punkt  # pylint: disable=g-import-not-at-top
  trainer = punkt.PunktTrainer()
  trainer.train(text, finalize=True)
  return punkt.PunktSentenceTokenizer(trainer.get_params())


def wikiextractor_documents(path: str) -> list[list[str]]:
  """WikiExtractor's `<doc>` blocks -> each document's paragraphs (one a line), its title line
  (the first) dropped, as NVIDIA's and MLPerf's cleanup drop it."""
  documents, title_next = [], False
  with open(path, encoding="utf-8") as f:
    for line in f:
      line = line.strip()
      if line.startswith("<doc "):
        documents.append([])
        title_next = True
      elif line == "</doc>":
        continue
      elif title_next:
        title_next = False
      elif line:
        documents[-1].append(line)
  return documents


def split_documents(tokenizer, documents: list[list[str]], output_path: str) -> dict:
  """One sentence a line, a blank line after each document."""
  sentences = 0
  with open(output_path, "w", encoding="utf-8") as out:
    for document in documents:
      lines = [s.strip() for p in document for s in tokenizer.tokenize(p) if s.strip()]
      if lines:
        out.write("\n".join(lines) + "\n\n")
        sentences += len(lines)
  return {"documents": len(documents), "sentences": sentences}


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
  parser.add_argument("--pretrained", action="store_true",
                      help="nupunkt's shipped model, no training.")
  parser.add_argument("--train_file", help="Text to train on (default: --input_file's).")
  parser.add_argument("--golden_rules")
  parser.add_argument("--time_file")
  parser.add_argument("--input_file")
  parser.add_argument("--output_file")
  args = parser.parse_args()
  documents = wikiextractor_documents(args.input_file) if args.input_file else None
  start = time.perf_counter()
  if args.pretrained:
    import nupunkt  # pylint: disable=g-import-not-at-top  (only this mode needs nupunkt)
    tokenizer = nupunkt.load_default_model()
  elif args.train_file:
    with open(args.train_file, encoding="utf-8") as f:
      text = f.read()
  elif documents is not None:
    text = "\n\n".join(p for document in documents for p in document)
  else:
    parser.error("give --pretrained, --train_file or --input_file")
  if not args.pretrained:
    tokenizer = train(text)
  result = {"load_s" if args.pretrained else "train_s": round(time.perf_counter() - start, 3)}
  if args.golden_rules:
    rules = splitter_eval.load_golden_rules(args.golden_rules)
    result.update(splitter_eval.score(tokenizer.tokenize, rules))
  if args.time_file:
    with open(args.time_file, encoding="utf-8") as f:
      result.update(splitter_eval.speed(tokenizer.tokenize, [p.strip() for p in f if p.strip()]))
  if documents is not None:
    start = time.perf_counter()
    result.update(split_documents(tokenizer, documents, args.output_file))
    result["split_s"] = round(time.perf_counter() - start, 3)
  print(json.dumps(result))


if __name__ == "__main__":
  main()
