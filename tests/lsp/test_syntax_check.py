"""The syntax check of everything shown or applied (syntax.Check and syntax.fit, through finish):
it reads the whole document around the insertion, not the model's trimmed window; it compares
where tree-sitter's errors are, not only how many; and for Python, when the document compiles,
whatever is shown must compile too. In-process, without a model: the items are written here.

The held-out cases are the shapes a plain LSP client was shown on held-out holes in public
Python: each broke a document that parsed without it, and each passed the old check, which
counted tree-sitter's error nodes in the model's window (trimmed mid-docstring, so already
broken: the new error folds into an old one).
"""

from __future__ import annotations

import re
import warnings
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import DATA

from infill_engine.context import Tokens, build_context
from infill_engine.finish import finish, syntax
from lsp_server.commands.editing import CommandError, Edit, checked

STORE = (DATA / "syntax" / "store.py").read_text("utf-8")


def compiles(source: str) -> bool:
    try:
        compile(source, "<test>", "exec", dont_inherit=True)
    except SyntaxError:
        return False
    return True


def tokens(text: str) -> Tokens:
    """A stand-in for the model's tokenizer: a word or a symbol with the spaces before it."""
    spans = [m.span() for m in re.finditer(r"\s*(?:\w+|\S)", text)]
    return Tokens(list(range(len(spans))), spans)


@dataclass(frozen=True)
class Held:
    """A hole in store.py: one line taken out (its indentation stays, the cursor after it), the
    item the model wrote there, and the model's window in tokens either side."""

    line: str
    item: str
    prefix_tokens: int
    suffix_tokens: int

    def document(self) -> tuple[str, int]:
        found = STORE.index(self.line)
        return STORE[:found] + STORE[STORE.index("\n", found) :], found


HELD_OUT = {
    # an unterminated string
    "return-format": Held('tags = ", ".join(self.tags) or "untagged"', 'return "%()', 128, 32),
    # an opened docstring
    "docstring-colon": Held('"""The store saved at path, replayed from its log;', '""":', 96, 96),
    "return-colon": Held("return key in self.records", "return False:", 544, 32),
    # tree-sitter reads it as an assignment from the next line; only compile refuses it
    "dangling-assign": Held(
        "self.config = dict(DEFAULT_CONFIG, **(config or {}))", "self.config =", 32, 96
    ),
    # an unclosed bracket
    "unclosed-call": Held(
        'self._log.write(json.dumps(entry) + "\\n")', "self._log.write(json.dumps(entry)", 416, 32
    ),
    # an opened triple-quoted string
    "open-docstring": Held(
        "record = self.records.get(key)", '"""The value stored under key, or default.', 576, 96
    ),
}


def test_the_fixture_compiles() -> None:
    assert compiles(STORE) and syntax.error_count(STORE, "python") == 0


@pytest.mark.parametrize("case", HELD_OUT.values(), ids=HELD_OUT.keys())
def test_a_held_out_item_that_breaks_the_document_is_not_shown(case: Held) -> None:
    text, at = case.document()
    before, after = text[:at], text[at:]
    assert compiles(text), "the document parses without the item"
    assert not compiles(before + case.item + after), "and not with it"
    window = build_context(text, at, tokens, case.prefix_tokens, case.suffix_tokens)
    # The old check's blind spot: in the window the model saw, the item adds no error node.
    errors = syntax.error_count(window.prefix + window.suffix, "python") or 0
    assert (syntax.error_count(window.prefix + case.item + window.suffix, "python") or 0) <= errors
    shown = finish(
        case.item, window.prefix, window.suffix, "python", document=syntax.Around(before, after)
    )
    assert shown != case.item
    if shown is not None:  # cut back to a clean start of the item
        assert case.item.startswith(shown) and compiles(before + shown + after), shown


def test_counting_on_the_whole_document_misses_what_compile_catches() -> None:
    text, at = HELD_OUT["dangling-assign"].document()
    before, after = text[:at], text[at:]
    # tree-sitter reads `self.config =` and the next line as one assignment: no error at all
    assert syntax.error_count(before + "self.config =" + after, "python") == 0
    assert syntax.fit(before, "self.config =", after, "python") == "self.config"


def test_what_tree_sitter_accepts_and_python_does_not_is_cut() -> None:
    before, after = "import os\n\n", "\n\nprint(os.sep)\n"
    assert syntax.error_count(before + "return os.sep" + after, "python") == 0
    assert syntax.fit(before, "return os.sep", after, "python") == ""  # outside a function


# Good completions: each is shown whole.


def test_a_completion_that_finishes_a_statement_is_shown() -> None:
    text, at = Held("return record.value if record else default", "", 0, 0).document()
    before, after = text[:at], text[at:]
    item = "return record.value if record else default"
    assert finish(item, before, after, "python", document=syntax.Around(before, after)) == item


def test_a_completion_that_closes_the_users_bracket_is_shown() -> None:
    at = STORE.index("self._log.write(") + len("self._log.write(")
    line_end = STORE.index("\n", at)
    before, after = STORE[:at], STORE[line_end:]  # the user typed `self._log.write(`
    assert not compiles(before + after)
    item = 'json.dumps(entry) + "\\n")'
    assert syntax.fit(before, item, after, "python") == item
    # the same line without its ")" is the user's unfinished line made longer: not shown
    assert syntax.fit(before, 'json.dumps(entry) + "\\n"', after, "python") == ""


def test_a_function_body_is_shown() -> None:
    at = STORE.index("    def close(self) -> None:\n")
    before = STORE[:at] + (
        '    def keys(self, prefix: str = "") -> list[str]:\n'
        '        """The keys that start with prefix, sorted."""\n'
        "        "
    )
    after = "\n\n" + STORE[at:]
    assert compiles(before + after)
    body = "found = [k for k in self.records if k.startswith(prefix)]\n        return sorted(found)"
    window = build_context(before + after, len(before), tokens, 256, 128)
    document = syntax.Around(before, after)
    assert finish(body, window.prefix, window.suffix, "python", document=document) == body
    # a broken last line is cut off, the good lines kept
    broken = body + "\n        return found[:"
    assert finish(broken, window.prefix, window.suffix, "python", document=document) == body


def test_a_command_replacing_a_body_is_checked_against_the_document_with_it() -> None:
    before = "def area(w: float, h: float) -> float:\n"
    old, after = "    pass", "\n\n\nprint(area(2, 3))\n"
    body = "    return w * h"
    assert syntax.fit(before, body + ":", after, "python", replaced=old) == body
    edit = Edit(len(before), len(before) + len(old), body, "filled")
    assert checked(edit, before + old + after, "python") is edit
    # `return` outside a function: tree-sitter has no error, compile refuses it
    at = len(before + old + "\n\n\n")
    bad = Edit(at, at + len("print(area(2, 3))"), "return area(2, 3)", "regenerated")
    with pytest.raises(CommandError, match="syntax error"):
        checked(bad, before + old + after, "python")
    # a broken selection regenerated: fixed, it is applied; still broken in its own text, not
    broken = "    retrun w h"
    text = before + broken + after
    fixed = Edit(len(before), len(before) + len(broken), body, "regenerated")
    assert checked(fixed, text, "python") is fixed
    with pytest.raises(CommandError, match="syntax error"):
        checked(Edit(fixed.start, fixed.end, "    return w h", "regenerated"), text, "python")


# Other languages: tree-sitter alone, by where the errors are.

OTHER = {
    "javascript": (
        "function total(items) {\n  let sum = 0;\n  for (const item of items) {\n    sum += ",
        "\n  }\n  return sum;\n}\n",
        "item.price * item.quantity;",
        "item.price * (item.quantity;",
    ),
    "rust": (
        "fn total(items: &[Item]) -> u32 {\n    let best = items.iter().map(",
        "\n    best.unwrap_or(0)\n}\n",
        "|i| i.price).max();",
        "|i| i.price)).max();",
    ),
    "go": (
        "package cart\n\nfunc Total(items []Item) int {\n\tsum := 0\n\tfor _, it := range ",
        "\n\treturn sum\n}\n",
        "items {\n\t\tsum += it.Price\n\t}",
        "items {\n\t\tsum += it.Price\n\t}\n\tsum *= (",
    ),
}


@pytest.mark.parametrize("language_id", OTHER)
def test_other_languages_clean_items_are_shown_and_dirty_ones_cut(language_id: str) -> None:
    before, after, good, bad = OTHER[language_id]
    document = syntax.Around(before, after)
    assert finish(good, before, after, language_id, document=document) == good
    shown = finish(bad, before, after, language_id, document=document)
    assert shown is not None and shown != bad and bad.startswith(shown)
    # the user's unfinished line may stay unfinished, but nothing is added to it
    errors = syntax.error_count(before + after, language_id) or 0
    assert (syntax.error_count(before + shown + after, language_id) or 0) <= errors, shown


def test_an_error_the_count_misses_is_found_by_where_it_is() -> None:
    # The user's open call is an error around the cursor; the item closes it and adds a ")"
    # of its own: one error for another, so counting passes it.
    before, after = "fn f(a: i32, b: i32) -> i32 {\n    let x = a.max(", "\n    x\n}\n"
    base = syntax.error_count(before + after, "rust") or 0
    assert base >= 1 and (syntax.error_count(before + "b));" + after, "rust") or 0) <= base
    assert syntax.fit(before, "b));", after, "rust") == "b)"
    # Python, in a document that does not compile (no compile check): the same, by tree-sitter
    before, after = "def f(x):\n    if x", "\n        return 1\n    return 0\n"
    assert syntax.fit(before, " > 0::", after, "python") == " > 0:"


def test_a_language_without_a_grammar_is_not_checked() -> None:
    assert syntax.fit("x = ", "(((", "\n", "cobol") == "((("


# The check only compiles: nothing of the document or the item ever runs.


def test_the_check_never_runs_code(tmp_path: Path) -> None:
    ran = tmp_path / "ran"
    before = f"import os\n\nopen({str(ran)!r}, 'w').close()\n\n\ndef main() -> None:\n    "
    after = "\n\n\nmain()\n"
    item = f"__import__('os').system('touch {ran}')"
    assert syntax.fit(before, item, after, "python") == item  # compiles, so it is shown
    # a broken item makes the check compile the document itself as well
    assert syntax.fit(before, item + ":", after, "python") == item
    assert not ran.exists()


def test_the_check_is_quiet_and_survives_what_compile_raises() -> None:
    before, after = "def f(s: str) -> str:\n    ", "\n"
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        # an invalid escape: compile warns (DeprecationWarning, SyntaxWarning from 3.12)
        assert syntax.fit(before, 'return re.sub("\\d", "", s)', after, "python")
    assert seen == []
    # a null byte: compile raises ValueError (before 3.12) or SyntaxError
    assert syntax.fit(before, "return s\x00", after, "python") == "return s"


def test_a_long_answer_is_cut_with_a_bounded_number_of_checks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The cuts tried hold at most MAX_CUT_CHARS of new text: a hosted answer of 8,000
    characters on one line costs a few checks (each a parse and a compile of all of it), not 24;
    a fill of a few hundred characters still tries its 24 longest cuts."""
    tried: list[int] = []
    clean = syntax.Check.clean

    def counted(self: syntax.Check, text: str) -> bool:
        tried.append(len(text))
        return clean(self, text)

    monkeypatch.setattr(syntax.Check, "clean", counted)
    before, after = "def f(a, b):\n    return ", "\n"
    words = " ".join(f"w{i}" for i in range(2_000))  # `return w0 w1 ...`: no cut past w0 is clean
    assert len(words) > 7_500 and syntax.fit(before, words, after, "python") == ""
    assert 1 <= len(tried) <= syntax.MAX_CUT_CHARS // 7_500 + 1, tried
    tried.clear()
    short = " ".join(f"w{i}" for i in range(60))
    assert syntax.fit(before, short, after, "python") == ""
    assert len(tried) == syntax.MAX_CUTS  # all 24 of a short one
    tried.clear()
    assert syntax.fit(before, "a + b" + " c" * 20, after, "python") == "a + b"
