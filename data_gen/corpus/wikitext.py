"""Wikitext -> the paper's "text passages": one article's paragraphs, markup gone.

`prefilter` first cuts what is dropped below and holds most of a page's bytes (templates,
references, comments, tables, formulas); mwparserfromhell parses the rest (its C tokenizer);
what the reader sees as running text is kept, everything else dropped:
  kept      text, bold and italics, a link's text (or its title), an external link's label,
            the contents of inline HTML (span, small, sup, ...), HTML entities as characters
            (once: `&amp;nbsp;` is the text "&nbsp;"), in link titles too;
  dropped   templates (infoboxes, citations, navboxes: what WikiExtractor would expand),
            <ref>s, tables, files and images, categories, interlanguage links, comments, math,
            galleries and other non-prose tags, headings, list items (`*`, `#`, `:`, `;`
            lines), horizontal rules, magic words (__TOC__).
A line that still holds markup after that (unbalanced brackets the parser left as text, a
table row outside a table) is dropped whole rather than let through, and so is one that starts
with `=` or an operator: what a dropped formula leaves ("<math>n_T</math> = total number of
cases"). Each remaining line is a paragraph.
"""
import dataclasses
import re

import mwparserfromhell
from mwparserfromhell import nodes as wiki_nodes
from mwparserfromhell import wikicode

from data_gen.corpus import prefilter

# Tags whose contents are not prose (or not text at all); `prefilter` cuts some before the parse.
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
# A paragraph that starts with one of these is the rest of a formula, not prose.
FORMULA_REST = re.compile(r"^[=+\u2212\u00d7\u00f7\u00b1<>\u2264\u2265\u2260\u2248^*/]")
MAGIC_WORD = re.compile(r"__[A-Z]+__")
# Brackets emptied by a dropped template: "Tallinn (; Estonian: ...)" -> "Tallinn (Estonian: ...)".
# (Over the page's text at once, its spaces already single: `_tidy`.)
EMPTY_BRACKETS = re.compile(r"\( ?[,;:]? ?\)")
BRACKET_LEADING_PUNCTUATION = re.compile(r"\( ?[,;:] ?")
DOUBLE_SPACE = re.compile(r"  +")
SPACE_BEFORE_PUNCTUATION = re.compile(r" (?=[,.;:!?)])")


@dataclasses.dataclass
class ParsedPage:
  """A page's wikitext, parsed: `code` the tree of what `prefilter` left, `templates` the names
  of the top-level templates it cut."""
  code: wikicode.Wikicode
  templates: list[str]


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
        shown = []
        _render(node.title.nodes, shown)  # its entities decoded: [[OS&nbsp;X]] shows "OS X"
        out.append("".join(shown).strip().lstrip(":"))
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


def parse(wikitext: str) -> ParsedPage:
  """The parsed page, what no passage shows cut first (`prefilter`): the slow step."""
  text, templates = prefilter.strip(wikitext, _hidden_link)
  return ParsedPage(mwparserfromhell.parse(text), templates)


def is_disambiguation(page: ParsedPage) -> bool:
  """Whether the page carries a disambiguation template."""
  return any(DISAMBIGUATION.search(name) for name in page.templates)


def _tidy(text: str) -> str:
  """`text` less magic words, emptied brackets and spaces before punctuation, each line's
  whitespace single spaces. (str.split for the whitespace: a regex over every space of a page
  costs more than the rest of its tidying.)"""
  text = "\n".join(" ".join(line.split()) for line in MAGIC_WORD.sub("", text).split("\n"))
  text = BRACKET_LEADING_PUNCTUATION.sub("(", EMPTY_BRACKETS.sub("", text))
  return SPACE_BEFORE_PUNCTUATION.sub("", DOUBLE_SPACE.sub(" ", text))


def passages(page: ParsedPage) -> list[str]:
  """The paragraphs of a parsed page (`parse`), in order: each one line of prose."""
  out = []
  _render(page.code.nodes, out)
  paragraphs = []
  for line in _tidy("".join(out)).split("\n"):
    if _DROP_LINE in line or LEFTOVER_MARKUP.search(line):
      continue
    line = line.strip()
    if any(c.isalnum() for c in line) and not FORMULA_REST.match(line):
      paragraphs.append(line)
  return paragraphs
