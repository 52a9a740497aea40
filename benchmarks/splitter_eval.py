"""How a sentence splitter is measured: pySBD's English Golden Rules (48 texts with their
expected sentences; a rule passes when the splitter gives exactly its sentences), boundary F1
against gold sentences (the Golden Rules', a UD treebank's), and its speed on paragraphs of
real text.

Kind: shared by every kind (benchmarks/); imported, never run. Standard library only, so a
peer's venv imports it too (PYTHONPATH=.).
"""
import ast
import re
import time
from typing import Callable

from benchmarks import data_root  # $BERT_TF_DATA

GOLDEN_RULES = data_root.path("sentences", "english_golden_rules.py")
# Abbreviations that come before a name, so never end a sentence.
TITLES = frozenset({"Mr.", "Mrs.", "Ms.", "Messrs.", "Dr.", "Prof.", "St.", "Mt.", "Gen.", "Col.",
                    "Capt.", "Lt.", "Sgt.", "Rev.", "Gov.", "Sen.", "Rep."})


def load_golden_rules(path: str) -> list[tuple[str, list[str]]]:
  """The (text, sentences) pairs of pySBD's benchmarks/english_golden_rules.py, read as data
  (its GOLDEN_EN_RULES literal), never run."""
  with open(path, encoding="utf-8") as f:
    tree = ast.parse(f.read(), path)
  for node in tree.body:
    if isinstance(node, ast.Assign) and any(
        getattr(target, "id", None) == "GOLDEN_EN_RULES" for target in node.targets):
      return ast.literal_eval(node.value)
  raise SystemExit(f"{path}: no GOLDEN_EN_RULES list")


def paragraphs(paths: list[str]) -> list[str]:
  """Each file's blocks between blank lines, their lines joined with single spaces."""
  found = []
  for path in paths:
    with open(path, encoding="utf-8") as f:
      found += [" ".join(block.split()) for block in re.split(r"\n\s*\n", f.read())
                if block.strip()]
  return found


def conllu_sentences(path: str) -> list[str]:
  """A CoNLL-U file's gold sentences, in order: its `# text = ` lines."""
  with open(path, encoding="utf-8") as f:
    return [line[len("# text = "):].strip() for line in f if line.startswith("# text = ")]


def _ends(sentences: list[str]) -> set[int]:
  """Where each sentence but the last ends, counted in non-space characters: the same
  boundaries whatever spaces a splitter keeps or drops around them."""
  ends, at = set(), 0
  for sentence in sentences[:-1]:
    at += len("".join(sentence.split()))
    ends.add(at)
  return ends


def boundaries(split: Callable[[str], list[str]],
               cases: list[tuple[str, list[str]]]) -> dict:
  """Boundary precision, recall and F1 of `split` over (text, gold sentences) cases: a
  boundary inside a text's gold sentences found at the same place is a hit. "altered": cases
  whose sentences do not give back the text's characters (their boundaries still count)."""
  hits = found = gold = altered = 0
  for text, expected in cases:
    got = split(text)
    altered += "".join("".join(got).split()) != "".join(text.split())
    want, have = _ends(expected), _ends(got)
    hits, found, gold = hits + len(want & have), found + len(have), gold + len(want)
  precision, recall = hits / max(found, 1), hits / max(gold, 1)
  f1 = 2 * precision * recall / max(precision + recall, 1e-12)
  return {"precision": round(precision, 4), "recall": round(recall, 4), "f1": round(f1, 4),
          "boundaries": gold, "altered": altered}


def score(split: Callable[[str], list[str]], rules: list[tuple[str, list[str]]]) -> dict:
  """{"passed": rules split exactly right, "total", "failed": the failed rules' numbers (from
  1, as the file numbers them)}. Sentences are compared stripped, empty ones dropped."""
  failed = [number for number, (text, expected) in enumerate(rules, 1)
            if [s.strip() for s in split(text) if s.strip()] != expected]
  return {"passed": len(rules) - len(failed), "total": len(rules), "failed": failed}


def speed(split: Callable[[str], list[str]], paragraphs: list[str]) -> dict:
  """MB of UTF-8 paragraph text split per CPU second of this process (one thread: a machine
  busy with other jobs slows its wall clock, not this), in a process that has split nothing
  before: over the first half of the paragraphs ("cold_mb_per_s": memos and caches filling, as
  in a worker's first minutes), then over the second half, text it has not seen ("mb_per_s":
  the steady state of a long run; nupunkt memoizes its decisions, the others keep no state).
  Also the sentences found, and how many of them end in a title abbreviation ("title_cuts": no
  sentence ends in "Mr.", so each is a boundary put inside one)."""
  result, found = {}, []
  half = len(paragraphs) // 2
  for key, part in (("cold_mb_per_s", paragraphs[:half]), ("mb_per_s", paragraphs[half:])):
    start = time.process_time()
    found += [split(paragraph) for paragraph in part]
    seconds = time.process_time() - start
    result[key] = round(sum(len(p.encode("utf-8")) for p in part) / 1e6 / seconds, 3)
  ends = [sentence.rsplit(None, 1)[-1] for sentences in found for sentence in sentences]
  result.update(sentences=len(ends), title_cuts=sum(end in TITLES for end in ends))
  return result
