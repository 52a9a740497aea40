"""A Project Gutenberg book as distributed -> its prose paragraphs.

  licence   everything up to the `*** START OF THE/THIS PROJECT GUTENBERG EBOOK ...` line and
            from the `*** END OF ...` line on; "End of the Project Gutenberg EBook of ..." and
            paragraphs naming Project Gutenberg or its producers ("Produced by ...");
  wrapping  a paragraph's hard-wrapped lines (blank lines between paragraphs) joined by spaces;
  headings  dropped: a paragraph with no lower-case letter (PROLOGUE, II, CHAPTER IV.); one
            starting with a chapter label (Chapter 3, BOOK II., XIV.) or of at most
            HEADING_WORDS words that ends in no sentence punctuation ("A Romance", "by Wilkie
            Collins", a contents entry); one laid out in columns (3+ spaces between words: a
            contents list).
A book without the markers is taken whole (`strip_licence`'s second value says so;
prepare_corpus warns).
"""
import re

START = re.compile(r"^\s*\*{3}\s*START OF (?:THE|THIS) PROJECT GUTENBERG", re.IGNORECASE)
END = re.compile(r"^\s*\*{3}\s*END OF (?:THE|THIS) PROJECT GUTENBERG", re.IGNORECASE)
LICENCE_PARAGRAPH = re.compile(
    r"project gutenberg|gutenberg\.(?:org|net)|^(?:produced|prepared|transcribed) by|"
    r"proofreading team|^end of (?:the )?project gutenberg", re.IGNORECASE)
# A chapter label, then a title or nothing: "CHAPTER I.", "Book II", "XIV.  We ride after him".
_NUMBER = (r"(?:[IVXLCDM]+|\d+|one|two|three|four|five|six|seven|eight|nine|ten|"
           r"(?:the\s+)?(?:first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|"
           r"last))")
CHAPTER_LABEL = re.compile(r"^(?:(?:chapter|book|part|volume|canto|section|letter)\s+"
                           + _NUMBER + r"\b|[IVXLCDM]+[.)](?:\s|$)|\d+[.)](?:\s|$))",
                           re.IGNORECASE)
SENTENCE_END = re.compile(r"[.!?…:;\"'”’)\]]$")
COLUMNS = re.compile(r"\S {3,}\S")
HEADING_WORDS = 12


def strip_licence(lines: list[str]) -> tuple[list[str], bool]:
  """The lines between the START and END markers, and whether both were there (without them,
  all lines)."""
  start = next((i for i, line in enumerate(lines) if START.match(line)), None)
  end = next((i for i, line in enumerate(lines) if END.match(line)), None)
  if start is None or end is None or end < start:
    return lines, False
  return lines[start + 1:end], True


def _is_heading(paragraph: str, lines: list[str]) -> bool:
  if not any(c.islower() for c in paragraph):
    return True
  ends_sentence = bool(SENTENCE_END.search(paragraph))
  if CHAPTER_LABEL.match(paragraph) and (not ends_sentence or
                                         len(paragraph.split()) <= HEADING_WORDS):
    return True
  if not ends_sentence and len(paragraph.split()) <= HEADING_WORDS:
    return True
  return any(COLUMNS.search(line.strip()) for line in lines)


def paragraphs(lines: list[str]) -> list[str]:
  """The prose paragraphs of a book's lines (the licence already stripped), in order."""
  result, block = [], []
  for line in lines + [""]:
    if line.strip():
      block.append(line)
      continue
    if block:
      paragraph = " ".join(" ".join(l.split()) for l in block)
      if not LICENCE_PARAGRAPH.search(paragraph) and not _is_heading(paragraph, block):
        result.append(paragraph)
      block = []
  return result
