"""An embedded corpus of real English prose that every Python install already has.

The standard library ships its documentation topics (`pydoc_data.topics`, ~460 KB): we keep the
prose paragraphs, drop code, grammar and headings, and split them into sentences. Each topic is
one document. The demo, the tests and the benchmarks use it so none of them needs a download.
"""
import re

from pydoc_data.topics import topics

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z\"(])")
_HEADING_RULE = re.compile(r"^[*=\-~^]{3,}$")


def _is_prose(paragraph: str) -> bool:
  """True for running text; False for code, grammar rules, tables and headings."""
  if paragraph.startswith((">>>", "...", "+", "|")) or "::=" in paragraph:
    return False
  words = paragraph.split()
  if len(words) < 6:
    return False
  alphabetic = sum(w.strip(".,;:()\"'").isalpha() for w in words)
  return alphabetic / len(words) > 0.7 and paragraph.rstrip()[-1] in ".:!?)\""


def _paragraphs(text: str):
  for block in re.split(r"\n\s*\n", text):
    lines = [l.strip() for l in block.splitlines() if not _HEADING_RULE.match(l.strip())]
    paragraph = " ".join(l for l in lines if l)
    if paragraph and _is_prose(paragraph):
      yield paragraph


def named_documents() -> dict[str, list[str]]:
  """The corpus by topic name (sorted): each documentation topic's sentences."""
  docs = {}
  for name in sorted(topics):
    sentences = [s.strip() for p in _paragraphs(topics[name]) for s in _SENTENCE_END.split(p)]
    sentences = [s for s in sentences if s]
    if len(sentences) >= 2:
      docs[name] = sentences
  return docs


def documents() -> list[list[str]]:
  """The corpus: one list of sentences per documentation topic, topics sorted by name."""
  return list(named_documents().values())


def write_corpus(path: str, repeat: int = 1, leave_out: frozenset[str] = frozenset()) -> int:
  """Writes the corpus in the pretraining input format (one sentence per line, a blank line
  between documents), `repeat` times over, without the sentences in `leave_out` (a task's
  held-out ones, so pretraining never reads them). Returns the number of documents written."""
  docs = [[s for s in sentences if s not in leave_out] for sentences in documents()]
  docs = [sentences for sentences in docs if sentences]
  with open(path, "w", encoding="utf-8") as f:
    for _ in range(repeat):
      for sentences in docs:
        f.write("\n".join(sentences))
        f.write("\n\n")
  return len(docs) * repeat
