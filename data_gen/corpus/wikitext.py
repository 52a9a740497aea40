"""Wikitext -> the paper's "text passages": one article's paragraphs, markup gone.

`prefilter` first cuts what is dropped below and holds most of a page's bytes (templates,
references, comments, tables, formulas, headings, lists, and resolves plain links);
mwparserfromhell's tokenizer (its C one) reads the rest, and `_render` its tokens: what the reader
sees as running text is kept, everything else dropped:
  kept      text, bold and italics, a link's text (or its title), an external link's label,
            the contents of inline HTML (span, small, sup, ...), HTML entities as characters
            (once: `&amp;nbsp;` is the text "&nbsp;"), in link titles too;
  dropped   templates (infoboxes, citations, navboxes: what WikiExtractor would expand),
            <ref>s, tables, files and images, categories (under every name of the wiki's:
            `namespaces`), interlanguage links in any language, comments, math,
            galleries and other non-prose tags, headings, list items (`*`, `#`, `:`, `;`
            lines), horizontal rules, magic words (__TOC__).
A line that still holds markup after that (unbalanced brackets the parser left as text, a
table row outside a table) is dropped whole rather than let through, and so is one that starts
with `=` or an operator: what a dropped formula leaves ("<math>n_T</math> = total number of
cases"). Each remaining line is a paragraph.
"""
from collections.abc import Callable
import dataclasses
import re

from mwparserfromhell import nodes as wiki_nodes
from mwparserfromhell import parser as wiki_parser
from mwparserfromhell.parser import tokens as wiki_tokens
from mwparserfromhell.parser import tokenizer as python_tokenizer

from data_gen.corpus import namespaces
from data_gen.corpus import prefilter

# Tags whose contents are not prose (or not text at all); `prefilter` cuts some before the parse.
DROPPED_TAGS = frozenset({
    "ref", "references", "table", "gallery", "math", "chem", "ce", "score", "timeline",
    "graph", "mapframe", "maplink", "imagemap", "syntaxhighlight", "source", "pre", "code",
    "templatedata", "templatestyles", "hiero", "inputbox", "categorytree", "poem", "hr",
    "noinclude", "includeonly", "onlyinclude", "div", "blockquote", "caption",
})
# `[[de:Artikel]]`, `[[zh-yue:...]]`: a language prefix, in lower case as no namespace writes
# it: an interlanguage link, shown beside the page, not in its text. (The prefixes of
# Wikimedia's other projects are no language: `[[wikt:ru:слово|слова]]` shows "слова".)
INTERLANGUAGE = re.compile(r"^[a-z][a-z-]{1,11}:")
INTERWIKI_PROJECTS = frozenset({
    "wikipedia", "wiktionary", "wikt", "wikinews", "wikibooks", "wikiquote", "wikisource",
    "wikispecies", "species", "wikiversity", "wikivoyage", "voy", "wikidata", "wikifunctions",
    "commons", "meta", "metawikimedia", "mw", "mediawikiwiki", "wikimedia", "foundation",
    "wmf", "incubator", "outreach", "wikitech", "phab", "phabricator",
})
# Templates that mark a disambiguation page ({{Disambiguation}}, {{Human name disambiguation}},
# {{Dab}}, Bulgarian {{Пояснение}}).
DISAMBIGUATION = re.compile(r"disambig|^dab$|^hndis|^geodis|^пояснение", re.IGNORECASE)
REDIRECT = re.compile(r"^\s*#\s*redirect\b", re.IGNORECASE)
# Marks a line to drop (a heading, a list item); never in text: XML 1.0 cannot hold it.
_DROP_LINE = "\0"
# Markup that no prose line holds once parsing is done, anywhere in it, or at its start (a table
# row's). (Substrings, not a regex: one tried at every character of a page costs more than its
# rendering.)
LEFTOVER_MARKUP = ("{{", "}}", "[[", "]]", "{|")
LEFTOVER_LINE_START = ("|", "!")
# A paragraph that starts with one of these is the rest of a formula, not prose.
FORMULA_REST = re.compile(r"^[=+\u2212\u00d7\u00f7\u00b1<>\u2264\u2265\u2260\u2248^*/]")
MAGIC_WORD = re.compile(r"__[A-Z]+__")
# Brackets emptied by a dropped template: "Tallinn (; Estonian: ...)" -> "Tallinn (Estonian: ...)".
# (Over the page's text at once, its spaces already single: `_tidy`.)
EMPTY_BRACKETS = re.compile(r"\( ?[,;:]? ?\)")
BRACKET_LEADING_PUNCTUATION = re.compile(r"\( ?[,;:] ?")
DOUBLE_SPACE = re.compile(r"  +")
SPACE_BEFORE_PUNCTUATION = re.compile(r" (?=[,.;:!?)])")


# mwparserfromhell's tokenizer: its C one, where its extension is built.
_Tokenizer = wiki_parser.CTokenizer or python_tokenizer.Tokenizer


def hidden_link_test(names: frozenset[str]) -> Callable[[str], bool]:
  """The test of whether `[[title]]` shows nothing in the text: a link to a file, medium or
  category under one of `names` (`namespaces.hidden_names`), to a file under any wiki's name
  (`namespaces.is_file_link`), or an interlanguage link. A leading colon (`[[:Category:X]]`)
  makes it an ordinary, visible link. (A closure, made once a run: it runs for every link of
  every page.)"""

  def hidden_link(title: str) -> bool:
    if ":" not in title or title.startswith(":"):
      return False
    prefix, target = title.split(":", 1)
    prefix = namespaces.normalized(prefix)
    return (prefix in names or namespaces.is_file_link(prefix, target)
            or (INTERLANGUAGE.match(title) is not None and prefix not in INTERWIKI_PROJECTS))

  return hidden_link


# Links under the English names alone hidden: for a page of no dump (a test's, a benchmark's).
ENGLISH_LINKS = hidden_link_test(namespaces.ENGLISH)


@dataclasses.dataclass
class ParsedPage:
  """A page's wikitext, parsed: `tokens` mwparserfromhell's tokens of what `prefilter` left,
  `templates` the names of the top-level templates it cut, `hidden_link` its links' test."""
  tokens: list
  templates: list[str]
  hidden_link: Callable[[str], bool] = ENGLISH_LINKS


def is_redirect(wikitext: str) -> bool:
  return bool(REDIRECT.match(wikitext))


class _Frame:
  """A construct open in `_render`'s token stream: the token that opened it, the text shown in
  the part read now (`shown`); once their part is over, a link's title, a tag's name and
  contents; an entity's kind."""
  __slots__ = ("opener", "shown", "title", "name", "contents", "numeric", "hexadecimal")

  def __init__(self, opener):
    self.opener, self.shown = opener, []
    self.title = self.name = self.contents = None
    self.numeric = self.hexadecimal = False


def _closed_tag(frame: _Frame, self_closing: bool) -> str:
  """What a tag shows once closed (`frame` its open construct)."""
  if frame.name is None:
    frame.name = "".join(frame.shown)
  tag = frame.name.strip().lower()
  markup = frame.opener.wiki_markup
  if tag in ("li", "dt", "dd") and markup:  # a list line's marker
    return _DROP_LINE
  if tag == "br":
    return " "
  if tag in DROPPED_TAGS or markup == "{|" or self_closing or frame.contents is None:
    return ""
  return "".join(frame.contents)


def _render(tokens: list, hidden_link: Callable[[str], bool]) -> str:
  """The visible text of mwparserfromhell's tokens of a page, links tested by `hidden_link`.
  (Read off the tokenizer's stream: the tree mwparserfromhell's builder makes of it is built
  once, walked once, and costs more than the tokenizer and this together.)"""
  stack = [_Frame(None)]
  for token in tokens:
    kind = type(token)
    frame = stack[-1]
    if kind is wiki_tokens.Text:
      frame.shown.append(token.text)
    elif kind in _OPENERS:
      stack.append(_Frame(token))
    elif kind is wiki_tokens.WikilinkSeparator:
      frame.title, frame.shown = "".join(frame.shown).strip(), []
    elif kind is wiki_tokens.ExternalLinkSeparator:
      frame.title, frame.shown = "", []  # the URL: shown nothing; the label next
    elif kind is wiki_tokens.TagAttrStart or kind is wiki_tokens.TagCloseOpen:
      if frame.name is None:
        frame.name = "".join(frame.shown)
      frame.shown = []  # an attribute's text is not shown; after TagCloseOpen: the contents
    elif kind is wiki_tokens.TagOpenClose:
      frame.contents, frame.shown = frame.shown, []  # the closing tag's name next
    elif kind in _CLOSERS:
      stack.pop()
      shown = (_link_shown(frame, hidden_link) if kind is wiki_tokens.WikilinkClose
               else _SHOWN[kind](frame))
      if shown:
        stack[-1].shown.append(shown)
    elif kind is wiki_tokens.HTMLEntityNumeric:
      frame.numeric = True
    elif kind is wiki_tokens.HTMLEntityHex:
      frame.hexadecimal = True
    # A template's separators, an attribute's `=` and quotes: nothing to show.
  return "".join(stack[0].shown)


def _link_shown(frame: _Frame, hidden_link: Callable[[str], bool]) -> str:
  if frame.title is not None:  # [[title|text]]
    return "" if hidden_link(frame.title) else "".join(frame.shown)
  title = "".join(frame.shown).strip()  # its entities decoded: [[OS&nbsp;X]] shows "OS X"
  return "" if hidden_link(title) else title.lstrip(":")


def _entity_shown(frame: _Frame) -> str:
  return wiki_nodes.HTMLEntity("".join(frame.shown), named=not frame.numeric,
                               hexadecimal=frame.hexadecimal).normalize()


_OPENERS = frozenset({
    wiki_tokens.WikilinkOpen, wiki_tokens.ExternalLinkOpen, wiki_tokens.HTMLEntityStart,
    wiki_tokens.HeadingStart, wiki_tokens.TagOpenOpen, wiki_tokens.TemplateOpen,
    wiki_tokens.ArgumentOpen, wiki_tokens.CommentStart})
# What each closing token's construct shows.
# (A link's: `_link_shown`, with the page's test.)
_SHOWN = {
    # [http://x label]: the label; a bare URL or [http://x]: nothing
    wiki_tokens.ExternalLinkClose:
        lambda frame: "" if frame.title is None else "".join(frame.shown),
    wiki_tokens.HTMLEntityEnd: _entity_shown,
    wiki_tokens.HeadingEnd: lambda frame: _DROP_LINE,
    wiki_tokens.TagCloseClose: lambda frame: _closed_tag(frame, False),
    wiki_tokens.TagCloseSelfclose: lambda frame: _closed_tag(frame, True),
    # Templates, template arguments, comments: nothing.
    wiki_tokens.TemplateClose: lambda frame: "",
    wiki_tokens.ArgumentClose: lambda frame: "",
    wiki_tokens.CommentEnd: lambda frame: "",
}
_CLOSERS = frozenset(_SHOWN) | {wiki_tokens.WikilinkClose}


def parse(wikitext: str, hidden_link: Callable[[str], bool] = ENGLISH_LINKS) -> ParsedPage:
  """The parsed page, what no passage shows cut first (`prefilter`): the slow step. Its links
  to files, media and categories, and interlanguage links, show nothing (`hidden_link`: a
  `hidden_link_test`'s)."""
  text, templates = prefilter.strip(wikitext, hidden_link)
  return ParsedPage(_Tokenizer().tokenize(text, 0, False), templates, hidden_link)


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
  paragraphs = []
  for line in _tidy(_render(page.tokens, page.hidden_link)).split("\n"):
    line = line.strip()
    if (not line or _DROP_LINE in line or line.startswith(LEFTOVER_LINE_START)
        or any(markup in line for markup in LEFTOVER_MARKUP) or FORMULA_REST.match(line)):
      continue
    if line[0].isalnum() or any(c.isalnum() for c in line):
      paragraphs.append(line)
  return paragraphs
