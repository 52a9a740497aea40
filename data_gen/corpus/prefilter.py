"""What a page's text passages never show, cut from its wikitext before mwparserfromhell parses it.

Most of a real article's bytes are templates (infoboxes, citations, navboxes), references,
comments and tables, and `wikitext` drops all of them. Building mwparserfromhell's tree for them
is most of the parse's time, so they are cut here first, by a scanner that finds the same spans
the parser would: templates by their balanced braces (nested, `{{{argument}}}`s inside too),
`<ref>...</ref>` and `<ref .../>`, `<references>`, comments, and the tags whose contents the
parser reads as plain text (`<math>`, `<pre>`, `<nowiki>`, ...: mwparserfromhell's
PARSER_BLACKLIST), which are skipped whole so that braces in a formula count for nothing. Those
tags are cut too when `wikitext` drops them; `<nowiki>` stays for the parser. Tables go by their
lines (`without_tables`).

What does not close (a `{{` without its `}}`, a `<ref>` without `</ref>`, a comment left open) is
left as it is: the parser reads it as text, and `wikitext` drops the line that shows it.

Each top-level template's name is kept: `wikitext` tells a disambiguation page by them.
"""
import re

from mwparserfromhell import definitions

# Tags whose contents are not wikitext to the parser (braces in them are not templates).
_VERBATIM_TAGS = frozenset(definitions.PARSER_BLACKLIST)
# Tags (verbatim or not) whose whole element the text passages drop.
_CUT_TAGS = frozenset({"ref", "references"}) | (_VERBATIM_TAGS - {"nowiki", "section"})
_BLOCK_TAGS = "|".join(sorted(_CUT_TAGS | _VERBATIM_TAGS, key=len, reverse=True))
# What the scanner acts on, the leftmost first: a comment's start, a run of braces, an opening
# tag of the ones above (its name in group 1; group 2 "/" when it closes itself).
_TOKEN = re.compile(r"<!--|\{\{+|\}\}+|\[\[|<(" + _BLOCK_TAGS + r")\b[^<>]*?(/?)>",
                    re.IGNORECASE)
# A link with nothing for the parser in it: its title (group 1) and text (group 2), plain.
_PLAIN_LINK = re.compile(r"\[\[([^\[\]{}<>|&'\n]+)(?:\|([^\[\]{}<>|&'\n]*))?\]\]")
_CLOSING_TAGS = {tag: re.compile(rf"</{tag}\s*>", re.IGNORECASE) for tag in _CUT_TAGS | _VERBATIM_TAGS}
_LINK_BRACKETS = re.compile(r"\[\[|\]\]")
_LINK_TITLE = re.compile(r"\[\[([^\[\]{}<>|\n]*)")
# A heading or list line: the passages drop it whole; where nothing on it may open what goes on
# to the next line (a tag, a link), it is cut before the parse.
_DROPPED_LINE = re.compile(r"^(?:[*#:;=])[^<\[\]{}\n]*$", re.MULTILINE)
_TEMPLATE_NAME = re.compile(r"\{\{([^{}|]*)")
TABLE_OPEN = re.compile(r"^[:\s]*\{\|")
TABLE_CLOSE = re.compile(r"^\s*\|\}")


def without_tables(wikitext: str) -> str:
  """The wikitext less its tables (`{|` to `|}`, each at a line's start, nested too). A table
  left open is the parser's to judge: the text is returned as it is."""
  if "{|" not in wikitext:
    return wikitext
  kept, depth = [], 0
  for line in wikitext.split("\n"):
    if TABLE_OPEN.match(line):
      depth += 1
    if not depth:
      kept.append(line)
    elif TABLE_CLOSE.match(line):
      depth -= 1
  return wikitext if depth else "\n".join(kept)


def _element_end(wikitext: str, token: re.Match) -> int:
  """Where the comment or tag element that `token` opens ends, or -1 where it does not close."""
  if token.group() == "<!--":
    end = wikitext.find("-->", token.end())
    return end + 3 if end >= 0 else -1
  if token.group(2):  # <ref name="x" />
    return token.end()
  closing = _CLOSING_TAGS[token.group(1).lower()].search(wikitext, token.end())
  return closing.end() if closing else -1


def _opened(run: int) -> list[int]:
  """The braces of each construct a run of `run` opening braces starts, outermost first: `{{` a
  template, `{{{` an argument; a longer run, templates around an argument where it is odd
  (`{{{{{` is `{{` around `{{{`)."""
  return [2] * ((run - 3) // 2) + [3] if run % 2 else [2] * (run // 2)


def _cut(kept: list[str], text: str, keep_from: int, start: int, end: int) -> int:
  """Appends text[keep_from:start] to `kept` for a cut of [start, end); returns where the text
  goes on: past `end`, and past an emphasis the cut leaves empty (in `(''{{lang|de|X}}'')` both
  `''` go: the parser renders nothing for them, but would show an apostrophe of `''''`)."""
  kept.append(text[keep_from:start])
  last = len(kept) - 1
  while last and not kept[last]:  # cuts side by side: the text before the first
    last -= 1
  if not kept[last].endswith("'"):
    return end
  before = len(kept[last]) - len(kept[last].rstrip("'"))
  after = len(text[end:end + 6]) - len(text[end:end + 6].lstrip("'"))
  if before == after and before in (2, 3, 5):
    kept[last] = kept[last][:-before]
    return end + after
  return end


def _link_end(text: str, start: int) -> int:
  """Where the link opening at `start` ends, links nested in it counted; -1 where it does not
  close."""
  depth = 0
  for bracket in _LINK_BRACKETS.finditer(text, start):
    depth += 1 if bracket.group() == "[[" else -1
    if not depth:
      return bracket.end()
  return -1


def _shown(link: re.Match, hidden_link) -> str | None:
  """What a plain link (`_PLAIN_LINK`) shows, where that starts with a letter or digit (no list
  or heading marker at a line's start for the parser to read) or is nothing; else None."""
  title, shown = link.group(1).strip(), link.group(2)
  if hidden_link(title):
    return ""
  shown = title.lstrip(":") if shown is None else shown
  return shown if not shown or shown[0].isalnum() else None


def strip(wikitext: str, hidden_link) -> tuple[str, list[str]]:
  """(the wikitext less its tables, templates, references, comments and dropped verbatim tags,
  its plain links as the text they show (`hidden_link(title)`: a link that shows nothing); the
  names of its top-level templates, in order)."""
  text = without_tables(wikitext)
  kept, names = [], []
  keep_from = pos = 0
  open_braces: list[int] = []  # the constructs open, outermost first: 2 or 3 braces each
  start = 0  # where the outermost open template began
  while True:
    token = _TOKEN.search(text, pos)
    if token is None:
      if not open_braces:
        break
      # The outermost `{{` never closes: the parser reads it as text; scan on after it.
      open_braces, pos = [], start + 2
      continue
    first = token.group()[0]
    if first == "<":
      end = _element_end(text, token)
      if end < 0:  # left open: the parser's to judge
        pos = token.end()
        continue
      if not open_braces and (token.group() == "<!--" or token.group(1).lower() in _CUT_TAGS):
        keep_from = _cut(kept, text, keep_from, token.start(), end)
      pos = max(end, keep_from)
    elif first == "[":
      pos, shown = token.end(), None
      link = None if open_braces else _PLAIN_LINK.match(text, token.start())
      if link is not None:
        shown, end = _shown(link, hidden_link), link.end()
      elif not open_braces and hidden_link(_LINK_TITLE.match(text, token.start()).group(1).strip()):
        # A file's or category's link, links in its caption too: it shows nothing.
        end = _link_end(text, token.start())
        shown = "" if end >= 0 else None
      if shown:  # (emphasis around it stays: the parser shows its text alike)
        kept += [text[keep_from:token.start()], shown]
        keep_from = pos = end
      elif shown is not None:
        keep_from = pos = _cut(kept, text, keep_from, token.start(), end)
    elif first == "{":
      if not open_braces:
        start = token.start()
      open_braces += _opened(len(token.group()))
      pos = token.end()
    elif not open_braces:
      pos = token.end()  # a `}}` that closes nothing: text, as the parser reads it
    else:
      run = len(token.group())
      while open_braces and run >= 2:  # innermost first; a `}}` closes a `{{{` too
        run -= min(open_braces.pop(), run)
      pos = token.end() - run  # braces left over are text after it
      if not open_braces:
        names.append(_TEMPLATE_NAME.match(text, start).group(1).strip())
        keep_from = pos = _cut(kept, text, keep_from, start, pos)
  if kept:
    kept.append(text[keep_from:])
    text = "".join(kept)
  return _DROPPED_LINE.sub("", text), names
