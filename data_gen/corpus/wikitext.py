"""Wikitext -> the paper's "text passages": one article's paragraphs, markup gone.

mwparserfromhell parses the wikitext (its C tokenizer); what the reader sees as running text is
kept, everything else dropped:
  kept      text, bold and italics, a link's text (or its title), an external link's label,
            the contents of inline HTML (span, small, sup, ...), HTML entities as characters;
  dropped   templates (infoboxes, citations, navboxes: what WikiExtractor would expand),
            <ref>s, tables, files and images, categories, interlanguage links, comments, math,
            galleries and other non-prose tags, headings, list items (`*`, `#`, `:`, `;`
            lines), horizontal rules, magic words (__TOC__).
A line that still holds markup after that (unbalanced brackets the parser left as text, a
table row outside a table) is dropped whole rather than let through. Each remaining line is a
paragraph.
"""
import re

import mwparserfromhell
from mwparserfromhell import nodes as wiki_nodes

# Tags whose contents are not prose (or not text at all).
DROPPED_TAGS = frozenset({
    "ref", "references", "table", "gallery", "math", "chem", "ce", "score", "timeline",
    "graph", "mapframe", "maplink", "imagemap", "syntaxhighlight", "source", "pre", "code",
    "templatedata", "templatestyles", "hiero", "inputbox", "categorytree", "poem", "hr",
    "noinclude", "includeonly", "onlyinclude", "div", "blockquote", "caption",
})
# Link namespaces that are not shown as text (English and the canonical ones, and Bulgarian,
# the other language here with a sample): a link to one is an image or a category.
HIDDEN_LINK_NAMESPACES = frozenset({
    "file", "image", "media", "category", "файл", "картинка", "изображение", "категория",
})
# `[[de:Artikel]]`: a language (or wiki) prefix, and no text of its own: an interlanguage link.
INTERLANGUAGE = re.compile(r"^[a-z][a-z-]{1,11}:")
# Templates that mark a disambiguation page ({{Disambiguation}}, {{Human name disambiguation}},
# {{Dab}}, Bulgarian {{Пояснение}}).
DISAMBIGUATION = re.compile(r"disambig|^dab$|^hndis|^geodis|^пояснение", re.IGNORECASE)
REDIRECT = re.compile(r"^\s*#\s*redirect\b", re.IGNORECASE)
# Marks a line to drop (a heading, a list item); never in text: XML 1.0 cannot hold it.
_DROP_LINE = "\0"
# Markup that no prose line holds once parsing is done.
LEFTOVER_MARKUP = re.compile(r"\{\{|\}\}|\[\[|\]\]|\{\||^\s*[|!]")
MAGIC_WORD = re.compile(r"__[A-Z]+__")
TABLE_OPEN = re.compile(r"^[:\s]*\{\|")
TABLE_CLOSE = re.compile(r"^\s*\|\}")
# Brackets emptied by a dropped template: "Tallinn (; Estonian: ...)" -> "Tallinn (Estonian: ...)".
EMPTY_BRACKETS = re.compile(r"\(\s*[,;:]?\s*\)")
BRACKET_LEADING_PUNCTUATION = re.compile(r"\(\s*[,;:]\s*")
SPACE_BEFORE_PUNCTUATION = re.compile(r"\s+(?=[,.;:!?)])")
WHITESPACE = re.compile(r"\s+")


def is_redirect(wikitext: str) -> bool:
  return bool(REDIRECT.match(wikitext))


def _hidden_link(title: str) -> bool:
  """Whether `[[title]]` shows nothing in the text (a file, a category, an interlanguage
  link). A leading colon (`[[:Category:X]]`) makes it an ordinary, visible link."""
  if title.startswith(":"):
    return False
  prefix = title.split(":", 1)[0].strip().lower() if ":" in title else ""
  return prefix in HIDDEN_LINK_NAMESPACES or bool(INTERLANGUAGE.match(title))


def _render(nodes, out: list[str]) -> None:
  """Appends the visible text of `nodes` (mwparserfromhell nodes) to `out`."""
  for node in nodes:
    if isinstance(node, wiki_nodes.Text):
      out.append(node.value)
    elif isinstance(node, wiki_nodes.Wikilink):
      title = str(node.title).strip()
      if node.text is not None:
        if not _hidden_link(title):
          _render(node.text.nodes, out)
      elif not _hidden_link(title):
        out.append(title.lstrip(":"))
    elif isinstance(node, wiki_nodes.ExternalLink):
      if node.title is not None:  # [http://x label]: the label; a bare URL: nothing
        _render(node.title.nodes, out)
    elif isinstance(node, wiki_nodes.HTMLEntity):
      out.append(node.normalize())
    elif isinstance(node, wiki_nodes.Heading):
      out.append(_DROP_LINE)
    elif isinstance(node, wiki_nodes.Tag):
      tag = str(node.tag).strip().lower()
      if tag in ("li", "dt", "dd") and node.wiki_markup:  # a list line's marker
        out.append(_DROP_LINE)
      elif tag == "br":
        out.append(" ")
      elif tag in DROPPED_TAGS or node.wiki_markup == "{|" or node.self_closing:
        continue
      elif node.contents is not None:
        _render(node.contents.nodes, out)
    # Templates, template arguments, comments: nothing.


def without_tables(wikitext: str) -> str:
  """The wikitext less its tables (`{|` to `|}`, each at a line's start, nested too): they are
  dropped anyway, and tokenizing them is most of mwparserfromhell's time on pages that have
  them (1.3 s of a page of award tables; the English sample parses 6x faster without). A table
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


def parse(wikitext: str):
  """The parsed page (mwparserfromhell's Wikicode), tables left out: the slow step."""
  return mwparserfromhell.parse(without_tables(wikitext))


def is_disambiguation(code) -> bool:
  """Whether the parsed page carries a disambiguation template."""
  return any(DISAMBIGUATION.search(str(t.name).strip())
             for t in code.filter_templates(recursive=False))


def _tidy(line: str) -> str:
  line = WHITESPACE.sub(" ", MAGIC_WORD.sub("", line))
  line = EMPTY_BRACKETS.sub("", line)
  line = BRACKET_LEADING_PUNCTUATION.sub("(", line)
  return WHITESPACE.sub(" ", SPACE_BEFORE_PUNCTUATION.sub("", line)).strip()


def passages(code) -> list[str]:
  """The paragraphs of a parsed page (`parse`), in order: each one line of prose."""
  out = []
  _render(code.nodes, out)
  paragraphs = []
  for line in "".join(out).split("\n"):
    if _DROP_LINE in line or LEFTOVER_MARKUP.search(line):
      continue
    line = _tidy(line)
    if any(c.isalnum() for c in line):
      paragraphs.append(line)
  return paragraphs
