"""What a page's text passages never show, cut from its wikitext before mwparserfromhell parses it.

Most of a real article's bytes are templates (infoboxes, citations, navboxes), references,
comments and tables, and `wikitext` drops all of them; tokenizing them, and rendering what they
become, is most of the parse's time. So they are cut here first, by a scanner that finds the
same spans the parser would: templates by their balanced braces (nested, `{{{argument}}}`s
inside too; a first pass over the braces alone), `<ref>...</ref>` and `<ref .../>`,
`<references>`, comments, and the tags whose contents the parser reads as plain text (`<math>`,
`<pre>`, `<nowiki>`, ...: mwparserfromhell's PARSER_BLACKLIST), which are skipped whole so that
braces in a formula count for nothing. Those tags are cut too when `wikitext` drops them;
`<nowiki>` stays for the parser. Tables go by their lines (`without_tables`), and so do heading
and list lines. A link to a file or a category goes whole, its caption's links too; a plain link
(nothing for the parser in it) becomes the text it shows.

What does not close (a `{{` without its `}}`, a `<ref>` without `</ref>`, a comment left open) is
left as it is: the parser reads it as text, and `wikitext` drops the line that shows it. Each
scan goes forward once: a page of unclosed `{{` costs no more than one of text.

Each top-level template's name is kept: `wikitext` tells a disambiguation page by them.
"""
import re

from mwparserfromhell import definitions

# Tags whose contents are not wikitext to the parser (braces in them are not templates).
_VERBATIM_TAGS = frozenset(definitions.PARSER_BLACKLIST)
# Tags (verbatim or not) whose whole element the text passages drop.
_CUT_TAGS = frozenset({"ref", "references"}) | (_VERBATIM_TAGS - {"nowiki", "section"})
_BLOCK_TAGS = "|".join(sorted(_CUT_TAGS | _VERBATIM_TAGS, key=len, reverse=True))
# A comment's start, or an opening tag of the ones above (its name the group "tag"; the group
# "closes" "/" when it closes itself): an element whose braces are no template's.
_ELEMENT = r"<!--|<(?P<tag>" + _BLOCK_TAGS + r")\b[^<>]*?(?P<closes>/?)>"
# What the scanner acts on, the leftmost first: first runs of braces (and the elements to skip),
# then links and the elements to cut. A link is the whole link where nothing in it is for the
# parser: its title (group 1) and text (group 2), plain. (In one match with the rest: most of a
# page's tokens are such links.)
_BRACES = re.compile(r"\{\{+|\}\}+|" + _ELEMENT, re.IGNORECASE)
_TOKEN = re.compile(r"\[\[(?:([^\[\]{}<>|&'\n]+)(?:\|([^\[\]{}<>|&'\n]*))?\]\])?|" + _ELEMENT,
                    re.IGNORECASE)
_CLOSING_TAGS = {tag: re.compile(rf"</{tag}\s*>", re.IGNORECASE)
                 for tag in _CUT_TAGS | _VERBATIM_TAGS}
_LINK_BRACKETS = re.compile(r"\[\[|\]\]")
_LINK_TITLE = re.compile(r"\[\[([^\[\]{}<>|\n]*)")
# A heading or list line: the passages drop it whole; where nothing on it may open what goes on
# to the next line (a tag, a link), it is cut before the parse. Matched from the newline before
# it (the text's first line given one): a pattern that starts with a literal is searched for
# that character alone, where `^` is tried at every character (4x the time).
_DROPPED_LINE = re.compile(r"\n[*#:;=][^<\[\]{}\n]*(?![^\n])")
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


class _Elements:
  """Where the comments and tag elements of a text end. Each kind's closing is searched forward
  only: once one is missing, no later element of its kind closes either (so each one left open
  costs nothing more, not a search to the text's end)."""

  def __init__(self, text: str):
    self.text, self.unclosed = text, set()

  def end(self, token: re.Match) -> int:
    """Where the element that `token` opens ends, or -1 where it does not close."""
    if token.group("closes"):  # <ref name="x" />
      return token.end()
    kind = token.group("tag").lower() if token.group("tag") else "<!--"
    if kind in self.unclosed:
      return -1
    if kind == "<!--":
      end = self.text.find("-->", token.end())
      end = end + 3 if end >= 0 else -1
    else:
      closing = _CLOSING_TAGS[kind].search(self.text, token.end())
      end = closing.end() if closing else -1
    if end < 0:
      self.unclosed.add(kind)
    return end


def _opened(run: int) -> list[int]:
  """The braces of each construct a run of `run` opening braces starts, outermost first: `{{` a
  template, `{{{` an argument; a longer run, templates around an argument where it is odd
  (`{{{{{` is `{{` around `{{{`)."""
  return [2] * ((run - 3) // 2) + [3] if run % 2 else [2] * (run // 2)


def _cut(kept: list[str], text: str, keep_from: int, start: int, end: int) -> int:
  """Appends text[keep_from:start] to `kept` for a cut of [start, end); returns where the text
  goes on: past `end`, and past an emphasis the cut leaves empty (in `(''{{lang|de|X}}'')` both
  `''` go: the parser renders nothing for them, but would show an apostrophe of `''''`)."""
  if start > keep_from:  # (no empty piece: cuts side by side look back to the text before them)
    kept.append(text[keep_from:start])
  if not kept or not kept[-1].endswith("'"):
    return end
  before = len(kept[-1]) - len(kept[-1].rstrip("'"))
  after = len(text[end:end + 6]) - len(text[end:end + 6].lstrip("'"))
  if before == after and before in (2, 3, 5):
    kept[-1] = kept[-1][:-before]
    return end + after
  return end


def _link_ends(text: str) -> dict[int, int]:
  """Where each link that closes ends, by where it starts, links nested in it counted (one pass
  for the page, not one a link)."""
  ends, open_now = {}, []
  for bracket in _LINK_BRACKETS.finditer(text):
    if bracket.group() == "[[":
      open_now.append(bracket.start())
    elif open_now:
      ends[open_now.pop()] = bracket.end()
  return ends


def _shown(link: re.Match, hidden_link) -> str | None:
  """What a plain link (`_TOKEN`'s) shows, where that starts with a letter or digit (no list
  or heading marker at a line's start for the parser to read) or is nothing; else None."""
  title, shown = link.group(1).strip(), link.group(2)
  if hidden_link(title):
    return ""
  shown = title.lstrip(":") if shown is None else shown
  return shown if not shown or shown[0].isalnum() else None


def _template_spans(text: str) -> list[tuple[int, int]]:
  """[start, end) of each template (or argument) the parser finds at the top level, in order:
  closed, and inside none that closes (a `{{` that never closes is text to the parser)."""
  elements = _Elements(text)
  starts, braces, parents = [], [], []  # of each construct opened
  open_now: list[int] = []  # the constructs open, outermost first
  closed = {}  # construct -> its end
  pos = 0
  while (token := _BRACES.search(text, pos)):
    run, pos = token.group(), token.end()
    if run[0] == "<":
      end = elements.end(token)
      pos = max(end, pos)  # skipped whole where it closes; else the parser's to judge
    elif run[0] == "{":
      start = token.start()
      for part in _opened(len(run)):
        parents.append(open_now[-1] if open_now else -1)
        open_now.append(len(starts))
        starts.append(start)
        braces.append(part)
        start += part
    else:
      left = len(run)
      while open_now and left >= 2:  # innermost first; a `}}` closes a `{{{` too
        construct = open_now.pop()
        left -= min(braces[construct], left)
        closed[construct] = token.end() - left  # braces left over are text after it
  return [(starts[c], end) for c, end in sorted(closed.items())
          if parents[c] < 0 or parents[c] not in closed]


def strip(wikitext: str, hidden_link) -> tuple[str, list[str]]:
  """(the wikitext less its tables, templates, references, comments and dropped verbatim tags,
  its plain links as the text they show (`hidden_link(title)`: a link that shows nothing); the
  names of its top-level templates, in order)."""
  text = without_tables(wikitext)
  elements, link_ends = _Elements(text), None
  kept, names = [], []
  keep_from = pos = 0
  for start, end in _template_spans(text) + [(len(text), len(text))]:
    while pos < start and (token := _TOKEN.search(text, pos, start)):
      pos = token.end()
      if text[token.start()] == "[":
        if token.group(1) is not None:
          shown, cut_end = _shown(token, hidden_link), pos
        elif hidden_link(_LINK_TITLE.match(text, token.start()).group(1).strip()):
          # A file's or category's link, links in its caption too: it shows nothing.
          link_ends = _link_ends(text) if link_ends is None else link_ends
          cut_end = link_ends.get(token.start(), -1)
          shown = "" if cut_end >= 0 else None
        else:
          shown = None
        if shown:  # (emphasis around it stays: the parser shows its text alike)
          kept += [text[keep_from:token.start()], shown]
          keep_from = pos = cut_end
        elif shown is not None:
          keep_from = pos = _cut(kept, text, keep_from, token.start(), cut_end)
      else:
        element_end = elements.end(token)
        tag = token.group("tag")
        if element_end >= 0 and (tag is None or tag.lower() in _CUT_TAGS):
          keep_from = _cut(kept, text, keep_from, token.start(), element_end)
        pos = max(element_end, keep_from, pos)
    if pos <= start < len(text):  # (a cut may have taken it: a template in a file's caption)
      names.append(_TEMPLATE_NAME.match(text, start).group(1).strip())
      keep_from = pos = _cut(kept, text, keep_from, start, end)
  if keep_from:  # something was cut
    kept.append(text[keep_from:])
    text = "".join(kept)
  return _DROPPED_LINE.sub("\n", "\n" + text)[1:], names
