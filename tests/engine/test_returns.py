"""A `return` its function's head rules out is never shown (finish/returns.py): what Go, Java,
C, C++ and Rust reject and tree-sitter parses."""

from __future__ import annotations

import pytest

from infill_engine.finish import finish
from infill_engine.finish.returns import Returns

GO = "package p\n\nfunc load(path string) (*Config, error) {\n\tif err != nil {\n\t\t"
GO_TAIL = "\n\t}\n\treturn c, nil\n}\n"


def test_go_a_return_with_the_wrong_number_of_values_is_never_shown() -> None:
    assert finish("return err", GO, GO_TAIL, "go") is None
    assert finish("return nil, err", GO, GO_TAIL, "go") == "return nil, err"


@pytest.mark.parametrize(
    ("language", "head", "line", "allowed"),
    [
        ("go", "func f() {", "return", True),
        ("go", "func f() {", "return x", False),
        ("go", "func f() error {", "return err", True),
        ("go", "func f() error {", "return", False),
        ("go", "func (r *R) f(a int) (int, error) {", "return 0, nil", True),
        ("go", "func (r *R) f(a int) (int, error) {", "return nil", False),
        ("go", "func f() (n int, err error) {", "return", True),  # named results: a bare return
        ("go", "func f() (n int, err error) {", "return n, err", True),
        ("go", "func f() (n int, err error) {", "return n", False),
        ("go", "func f() (map[string]int, error) {", "return m, nil", True),
        ("go", "func f[T any](x T) T {", "return x", True),
        ("java", "public void run() {", "return;", True),
        ("java", "public void run() {", "return x;", False),
        ("java", "public int size() {", "return;", False),
        ("java", "public int size() {", "return n; // the count", True),
        ("java", "public Point(int x) {", "return x;", False),  # a constructor
        ("c", "static void *alloc(size_t n) {", "return p;", True),
        ("cpp", "Point::Point(int x) {", "return;", True),
        ("rust", "fn f(&self) -> usize {", "return;", False),
        ("rust", "fn f(&self) -> usize {", "return self.n;", True),
        ("rust", "pub fn f(&mut self) {", "return x;", False),
        ("typescript", "function f(): void {", "return x;", False),
        ("cpp", "auto f() {", "return;", True),  # not known: everything passes
        ("go", "x := func() error {", "return", True),  # a closure: not known
        ("typescript", "function f(a) {", "return a;", True),  # JavaScript says nothing
    ],
)
def test_what_a_head_lets_a_return_give(language: str, head: str, line: str, allowed: bool) -> None:
    before = f"{head}\n    if (x) {{\n        "
    assert Returns(before, language).allows(line) is allowed


def test_a_closure_on_the_way_up_says_nothing() -> None:
    before = "func f() error {\n\tgo func() {\n\t\t"
    assert Returns(before, "go").allows("return")  # the closure's, not f's
    before = "int f() {\n  auto g = [&](int a) {\n    "
    assert Returns(before, "cpp").allows("return;")


def test_a_head_over_several_lines_says_nothing() -> None:
    before = "func f(\n\ta int,\n) error {\n\t"
    assert Returns(before, "go").allows("return")


def test_c_a_head_with_its_type_on_the_line_above_says_nothing() -> None:
    before = "static int\nparse(const char *s) {\n\tif (x)\n\t\t"
    assert Returns(before, "c").allows("return (0);")


def test_a_return_ruled_out_is_not_cut_into_another() -> None:
    doc = "package p\n\nfunc f() int {\n\t"
    assert finish("return a, b", doc, "\n}\n", "go") is None  # not `return a`
