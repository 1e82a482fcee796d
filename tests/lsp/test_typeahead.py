"""The typed-ahead cache: hits while the user types into the completion, misses otherwise."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from lsp_server.completion.typeahead import TypeaheadCache

URI = "file:///a.py"
BEFORE = "def f(x):\n    return "
AFTER = "\n"


def test_typed_prefix_hits() -> None:
    cache = TypeaheadCache()
    cache.remember(URI, BEFORE, AFTER, ["x + 1"])
    assert cache.lookup(URI, BEFORE + "x", AFTER) == [" + 1"]
    assert cache.lookup(URI, BEFORE + "x +", AFTER) == [" 1"]
    assert (cache.hits, cache.misses) == (2, 0)


def test_same_position_returns_the_same_completions() -> None:
    cache = TypeaheadCache()
    cache.remember(URI, BEFORE, AFTER, ["x + 1", "", "y"])
    assert cache.lookup(URI, BEFORE, AFTER) == ["x + 1", "y"]


def test_typed_char_not_matching_misses() -> None:
    cache = TypeaheadCache()
    cache.remember(URI, BEFORE, AFTER, ["x + 1"])
    assert cache.lookup(URI, BEFORE + "y", AFTER) is None
    assert (cache.hits, cache.misses) == (0, 1)


def test_backspace_misses() -> None:
    cache = TypeaheadCache()
    cache.remember(URI, BEFORE, AFTER, ["x + 1"])
    assert cache.lookup(URI, BEFORE[:-1], AFTER) is None


def test_edit_before_the_remembered_position_misses() -> None:
    cache = TypeaheadCache()
    cache.remember(URI, BEFORE, AFTER, ["x + 1"])
    edited = BEFORE.replace("f(x)", "g(x)")
    assert cache.lookup(URI, edited + "x", AFTER) is None


def test_different_after_misses() -> None:
    cache = TypeaheadCache()
    cache.remember(URI, BEFORE, AFTER, ["x + 1"])
    assert cache.lookup(URI, BEFORE + "x", ")" + AFTER) is None
    assert cache.lookup(URI, BEFORE + "x", "\r") is None  # same length, other text


def test_other_uri_misses() -> None:
    cache = TypeaheadCache()
    cache.remember(URI, BEFORE, AFTER, ["x + 1"])
    assert cache.lookup("file:///b.py", BEFORE + "x", AFTER) is None


def test_completion_fully_typed_misses() -> None:
    cache = TypeaheadCache()
    cache.remember(URI, BEFORE, AFTER, ["x + 1"])
    assert cache.lookup(URI, BEFORE + "x + 1", AFTER) is None
    assert cache.lookup(URI, BEFORE + "x + 12", AFTER) is None


def test_whitespace_only_remainder_misses() -> None:
    cache = TypeaheadCache()
    cache.remember(URI, BEFORE, AFTER, ["x  \n"])
    assert cache.lookup(URI, BEFORE + "x", AFTER) is None


def test_multiple_completions_are_filtered_and_deduplicated() -> None:
    cache = TypeaheadCache()
    cache.remember(URI, BEFORE, AFTER, ["x + 1", "y * 2", "x + 2", "x + 1", "x"])
    assert cache.lookup(URI, BEFORE + "x", AFTER) == [" + 1", " + 2"]
    assert cache.lookup(URI, BEFORE + "x + 2", AFTER) is None
    assert cache.lookup(URI, BEFORE + "y", AFTER) == [" * 2"]


def test_eviction_by_size_drops_the_oldest() -> None:
    cache = TypeaheadCache(size=2)
    for name in "abc":
        cache.remember(f"file:///{name}", BEFORE, AFTER, ["x"])
    assert cache.lookup("file:///a", BEFORE, AFTER) is None
    assert cache.lookup("file:///b", BEFORE, AFTER) == ["x"]
    assert cache.lookup("file:///c", BEFORE, AFTER) == ["x"]


def test_re_remembering_a_uri_makes_it_newest() -> None:
    cache = TypeaheadCache(size=2)
    cache.remember("file:///a", BEFORE, AFTER, ["x"])
    cache.remember("file:///b", BEFORE, AFTER, ["x"])
    cache.remember("file:///a", BEFORE, AFTER, ["y"])
    cache.remember("file:///c", BEFORE, AFTER, ["x"])
    assert cache.lookup("file:///b", BEFORE, AFTER) is None
    assert cache.lookup("file:///a", BEFORE, AFTER) == ["y"]


def test_one_entry_per_uri() -> None:
    cache = TypeaheadCache()
    cache.remember(URI, BEFORE, AFTER, ["x + 1"])
    cache.remember(URI, BEFORE + "z", AFTER, ["oo"])
    assert cache.lookup(URI, BEFORE + "x", AFTER) is None
    assert cache.lookup(URI, BEFORE + "zo", AFTER) == ["o"]


def test_remembering_nothing_forgets_the_uri() -> None:
    cache = TypeaheadCache()
    cache.remember(URI, BEFORE, AFTER, ["x + 1"])
    cache.remember(URI, BEFORE, AFTER, ["", ""])
    assert cache.lookup(URI, BEFORE, AFTER) is None


def test_size_zero_stores_nothing() -> None:
    cache = TypeaheadCache(size=0)
    cache.remember(URI, BEFORE, AFTER, ["x"])
    assert cache.lookup(URI, BEFORE, AFTER) is None


def test_clear_one_uri_or_all() -> None:
    cache = TypeaheadCache()
    cache.remember("file:///a", BEFORE, AFTER, ["x"])
    cache.remember("file:///b", BEFORE, AFTER, ["x"])
    cache.clear("file:///a")
    assert cache.lookup("file:///a", BEFORE, AFTER) is None
    assert cache.lookup("file:///b", BEFORE, AFTER) == ["x"]
    cache.clear()
    assert cache.lookup("file:///b", BEFORE, AFTER) is None


def test_long_documents_compare_a_bounded_tail() -> None:
    before = "x = 1\n" * 500_000
    after = "y = 2\n" * 500_000
    cache = TypeaheadCache()
    cache.remember(URI, before, after, ["print(x)"])
    typed = before + "pri"
    assert cache.lookup(URI, typed, after) == ["nt(x)"]
    # far edits go unseen, at either end: the lookup reads a bounded tail of the text before
    # the cursor and a bounded head of the text after it, never the whole 3 MB (what this test
    # means; a wall-clock bound on 200 lookups said it less surely, and a loaded machine broke it)
    assert cache.lookup(URI, "z" + typed[1:], after) == ["nt(x)"]
    assert cache.lookup(URI, typed, after[:-2] + "z\n") == ["nt(x)"]


@given(st.text(alphabet="ab \n", min_size=1, max_size=12), st.integers(min_value=0, max_value=12))
def test_typing_any_prefix_returns_the_rest(completion: str, cut: int) -> None:
    cache = TypeaheadCache()
    cache.remember(URI, BEFORE, AFTER, [completion])
    rest = completion[cut:]
    expected = [rest] if cut <= len(completion) and rest.strip() else None
    assert cache.lookup(URI, BEFORE + completion[:cut], AFTER) == expected
