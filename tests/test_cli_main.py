"""The top-level command line: help, version, verb registry."""

import pytest

from margin_solver._version import __version__
from margin_solver.cli import VERB_MODULES, _verbs, main


def test_help_lists_every_verb_with_an_example(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    for module in _verbs():
        assert module.NAME in out
        assert module.EXAMPLE in out
    assert len(_verbs()) == len(VERB_MODULES)


def test_version(capsys):
    with pytest.raises(SystemExit):
        main(["--version"])
    assert __version__ in capsys.readouterr().out


def test_no_verb_prints_help_and_fails(capsys):
    assert main([]) == 2
    assert "usage: margin-solver" in capsys.readouterr().out


def test_unknown_verb_is_an_argparse_error(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["frobnicate"])
    assert exc.value.code == 2
    assert "invalid choice" in capsys.readouterr().err
