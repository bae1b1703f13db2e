"""The comparison the doc tests make (tests/docrun.py): words exactly, numbers to a relative
1e-3 or both at most 1e-6 in magnitude, ``...`` for any text, and messages that name the place
on the page with the shown and the printed line."""

import docrun
import pytest


@pytest.mark.parametrize(
    ("shown", "printed"),
    [
        ("best of 18 starts: ||v|| = 0.191535", "best of 18 starts: ||v|| = 0.1915352"),
        ("gap=1.7e-09, lower bound 2.84282", "gap=3.1e-09, lower bound 2.84282"),
        ("test error   0.178       0.178", "test error 0.178 0.178"),
        ("24 cells run (... s)", "24 cells run (8.5 s)"),
        ("lower bound 0.190251 (...), gap 0.0067", "lower bound 0.190251 (time_limit), gap 0.0067"),
        (
            "-rw-r--r-- 1 ... results/r.csv",
            "-rw-r--r-- 1 root root 34989 Dec  7 00:09 results/r.csv",
        ),
        ("a ... b ... c", "a b c"),
    ],
)
def test_lines_that_agree(shown, printed):
    assert docrun.same_line(shown, printed)


@pytest.mark.parametrize(
    ("shown", "printed"),
    [
        ("best of 17 starts", "best of 18 starts"),  # a count is a number like any other
        ("||v|| = 8.18786", "||v|| = 6.78844"),
        ("||v|| = 0.191535", "||v|| = 0.1918"),  # 1.4e-3 apart
        ("gap 1e-06", "gap 1e-05"),
        ("AGREES: predicted benign", "NOT COMPARABLE: predicted benign"),
        ("status 'completed'", "status 'not_fitted'"),
        ("24 cells run (... s)", "24 cells run (8.5 s) twice"),
        ("a ... c", "a b"),
    ],
)
def test_lines_that_differ(shown, printed):
    assert not docrun.same_line(shown, printed)


def test_a_difference_names_the_place_and_both_lines():
    shown = ["status optimal", "norm 8.18786"]
    printed = "status optimal\nnorm 6.78844\nexit 0\n\n"
    assert docrun.differences(shown, printed, "docs/usage.md:315") == [
        "docs/usage.md:315, output line 2:\n  shown:   norm 8.18786\n  printed: norm 6.78844",
        "docs/usage.md:315, output line 3:\n  shown:   (nothing)\n  printed: exit 0",
    ]
    assert docrun.differences(shown, "status optimal\nnorm 8.18786\n", "x") == []


def test_an_output_block_belongs_to_the_python_block_before_it(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("```python\nprint(1)\n```\n\ntext\n\n```output\n1\n```\n")
    (example,) = docrun.examples(docrun.blocks(page))
    assert example.shown == ["1"]
    page.write_text("```\n$ echo 1\n1\n```\n\n```output\n1\n```\n")
    with pytest.raises(ValueError, match="line 6: an output block must follow a Python block"):
        docrun.examples(docrun.blocks(page))


def test_a_page_that_prints_otherwise_fails_with_the_place(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(
        "```python\nprint('norm', 2 / 3)\n```\n\n```output\nnorm 0.67\n```\n\n"
        '```\n$ echo "exit 3"; exit 3\nexit 3\n```\n'
    )
    run = docrun.run_page(page, tmp_path, "page.md")
    assert run.ran == 2
    assert run.differences[0].startswith("page.md:1, output line 1:")
    assert "exit status 3, not shown on the page" in run.differences[1]
    assert len(run.differences) == 2
