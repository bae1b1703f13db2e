"""Figures a researcher can put in a paper (issue 15, part 3): the format follows the file
suffix everywhere a figure is written, PNGs keep their colours, one style as a context, cell
numbers readable on every cell, colour-blind-safe colours, panels that carry information."""

from __future__ import annotations

import itertools
import re
import subprocess
import sys
import xml.etree.ElementTree as ET

import matplotlib
import numpy as np
import pytest
from matplotlib.colors import to_rgb
from matplotlib.figure import Figure
from PIL import Image

from margin_solver.bench import study_plots
from margin_solver.bench.plots import label_cells, save_figure
from margin_solver.bench.studies import run_bench
from margin_solver.bench.style import (
    OKABE_ITO,
    STYLE,
    figure_format,
    figure_style,
    saving_as,
    text_colour_on,
)
from margin_solver.bench.sweeps import SweepConfig, SweepGrid, run_sweep
from margin_solver.cli import EXIT_INPUT_ERROR, main
from margin_solver.core.data import PaperDistribution
from margin_solver.core.validation import InvalidInputError


def _figure() -> Figure:
    with figure_style():
        fig = Figure(figsize=(2, 1.5))
        ax = fig.add_subplot()
        mesh = ax.pcolormesh(np.linspace(0, 1, 16).reshape(4, 4), cmap="viridis")
        fig.colorbar(mesh, ax=ax)
        ax.set_xlabel(r"$\kappa = n\,\mathrm{SNR}^2$")
    return fig


# --- the format follows the suffix ---------------------------------------------------------------
def test_pdf_svg_and_full_colour_png_from_the_suffix(tmp_path):
    fig = _figure()
    assert save_figure(fig, tmp_path / "f.pdf").read_bytes().startswith(b"%PDF-")
    assert save_figure(fig, tmp_path / "F.PDF").read_bytes().startswith(b"%PDF-")  # any case
    root = ET.parse(save_figure(fig, tmp_path / "f.svg")).getroot()
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    png = save_figure(fig, tmp_path / "f.png")
    with Image.open(png) as img:
        assert img.format == "PNG" and img.mode in ("RGB", "RGBA")  # not a 256-colour palette
        assert img.info["dpi"][0] == pytest.approx(200, abs=1)
        # A viridis gradient has more than 256 colours once nothing quantises it.
        assert len(img.convert("RGB").getcolors(maxcolors=1 << 20)) > 256


def test_vector_files_are_reproducible(tmp_path):
    """No creation date in PDF/SVG: the same figure drawn twice gives the same bytes."""
    for suffix in (".pdf", ".svg"):
        a = save_figure(_figure(), tmp_path / f"a{suffix}").read_bytes()
        assert save_figure(_figure(), tmp_path / f"b{suffix}").read_bytes() == a


@pytest.mark.parametrize("name", ["f.jpg", "f", "f.png.txt", "f.eps"])
def test_an_unknown_suffix_is_refused_and_nothing_is_written(tmp_path, name):
    with pytest.raises(InvalidInputError, match=r"give a file name ending in \.pdf, \.svg"):
        save_figure(_figure(), tmp_path / name)
    assert list(tmp_path.iterdir()) == []


def test_gd_plot_with_an_unknown_suffix_fails_before_gradient_descent(tmp_path, capsys):
    data = tmp_path / "train.npz"
    PaperDistribution(d=30, snr=0.5, eta=0.1).sample(8, seed=0).save(data)
    assert main(["gd", str(data), "--plot", str(tmp_path / "g.jpg")]) == EXIT_INPUT_ERROR
    out, err = capsys.readouterr()
    assert out == ""  # no GD table: refused before any work
    assert err.count("\n") == 1 and "unknown figure format '.jpg'" in err
    assert main(["gd", str(data), "--plot", str(tmp_path / "g.svg")]) == 0
    assert b"<svg" in (tmp_path / "g.svg").read_bytes()


def test_saving_as_rewrites_the_suffix_and_returns_the_file_written(tmp_path):
    with saving_as("pdf"):
        path = save_figure(_figure(), tmp_path / "x.png")
    assert path == tmp_path / "x.pdf" and path.read_bytes()[:4] == b"%PDF"
    assert not (tmp_path / "x.png").exists()
    with pytest.raises(InvalidInputError, match=re.escape("unknown figure format '.jpg'")):
        with saving_as("jpg"):
            pass


def test_bench_format_pdf_writes_every_figure_as_pdf(tmp_path, capsys):
    out = tmp_path / "b"
    argv = ["bench", "--tiny", "--only", "eta", "--jobs", "1", "--no-progress", "--out", str(out)]
    assert main([*argv, "--format", "pdf"]) == 0
    assert (out / "eta.pdf").read_bytes()[:4] == b"%PDF" and not (out / "eta.png").exists()
    report = (out / "REPORT.md").read_text()
    assert "[eta.pdf](eta.pdf)" in report and "--format pdf" in report
    capsys.readouterr()
    with pytest.raises(SystemExit) as stop:  # argparse: one line, exit 2
        main([*argv, "--format", "jpg"])
    assert stop.value.code == EXIT_INPUT_ERROR
    assert "invalid choice: 'jpg'" in capsys.readouterr().err
    with pytest.raises(InvalidInputError, match=re.escape("unknown figure format '.tiff'")):
        run_bench(tmp_path / "c", "tiny", studies=["eta"], figure_format="tiff")
    assert not (tmp_path / "c").exists()  # refused before any study ran


def test_the_suffix_check_does_not_load_matplotlib():
    """The command line checks --plot before any work without loading matplotlib."""
    code = (
        "import sys\nfrom margin_solver.bench.style import figure_format\n"
        "figure_format('a.pdf')\nprint('matplotlib' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# --- one style, as a context ----------------------------------------------------------------------
def test_the_style_is_in_force_inside_the_context_only():
    before = matplotlib.rcParams["font.size"], matplotlib.rcParams["pdf.fonttype"]
    with figure_style():
        for key, value in STYLE.items():
            expected = matplotlib.rcParams.validate[key](value)
            assert matplotlib.rcParams[key] == expected, key
        cycle = matplotlib.rcParams["axes.prop_cycle"].by_key()["color"]
        assert [c.upper() for c in cycle] == list(OKABE_ITO)
        assert matplotlib.rcParams["pdf.fonttype"] == 42  # TrueType: journals refuse Type 3
    assert (matplotlib.rcParams["font.size"], matplotlib.rcParams["pdf.fonttype"]) == before


def test_figure_style_works_as_a_decorator():
    @figure_style()
    def size() -> float:
        return matplotlib.rcParams["font.size"]

    assert size() == STYLE["font.size"]


def test_figure_format_names():
    assert [figure_format(f"a{s}") for s in (".pdf", ".SVG", ".Png")] == ["pdf", "svg", "png"]


# --- annotations readable on every cell ----------------------------------------------------------
def test_contrast_rule_picks_light_text_on_dark_cells():
    assert text_colour_on(to_rgb("black")) == "white"
    assert text_colour_on(to_rgb("white")) == "black"
    assert text_colour_on(to_rgb("#0072B2")) == "white"  # Okabe-Ito blue
    assert text_colour_on(to_rgb("#E69F00")) == "black"  # Okabe-Ito orange
    viridis = matplotlib.colormaps["viridis"]
    assert [text_colour_on(viridis(x)) for x in (0.0, 0.3, 0.7, 1.0)] == [
        "white",
        "white",
        "black",
        "black",
    ]


def test_cell_labels_are_white_on_dark_and_black_on_light_cells():
    values = np.array([[0.0, 0.5], [0.05, 0.45]])
    with figure_style():
        fig = Figure()
        ax = fig.add_subplot()
        mesh = ax.pcolormesh([0, 1, 2], [0, 1, 2], values, cmap="viridis", vmin=0, vmax=0.5)
        label_cells(ax, mesh, [0.5, 1.5], [0.5, 1.5], values)
    colours = {t.get_text(): t.get_color() for t in ax.texts}
    assert colours == {"0.00": "white", "0.05": "white", "0.50": "black", "0.45": "black"}
    assert min(t.get_fontsize() for t in ax.texts) >= 7  # readable in print


# --- colour-blind-safe colours --------------------------------------------------------------------
#: Machado, Oliveira and Fernandes (2009), severity 1, acting on linear sRGB.
_DICHROMACY = {
    "protanopia": [
        [0.152286, 1.052583, -0.204868],
        [0.114503, 0.786281, 0.099216],
        [-0.003882, -0.048116, 1.051998],
    ],
    "deuteranopia": [
        [0.367322, 0.860646, -0.227968],
        [0.280085, 0.672501, 0.047413],
        [-0.011820, 0.042940, 0.968881],
    ],
    "tritanopia": [
        [1.255528, -0.076749, -0.178779],
        [-0.078411, 0.930809, 0.147602],
        [0.004733, 0.691367, 0.303900],
    ],
    "normal vision": np.eye(3).tolist(),
}


def _lab(colour: str, vision: str) -> np.ndarray:
    """CIELAB (D65) of ``colour`` as seen with ``vision``."""
    c = np.asarray(to_rgb(colour))
    linear = np.where(c <= 0.04045, c / 12.92, ((c + 0.055) / 1.055) ** 2.4)
    linear = np.clip(np.asarray(_DICHROMACY[vision]) @ linear, 0, 1)
    xyz = (
        np.array([[0.4124, 0.3576, 0.1805], [0.2126, 0.7152, 0.0722], [0.0193, 0.1192, 0.9505]])
        @ linear
        / np.array([0.95047, 1.0, 1.08883])
    )
    f = np.where(xyz > (6 / 29) ** 3, np.cbrt(xyz), xyz / (3 * (6 / 29) ** 2) + 4 / 29)
    return np.array([116 * f[1] - 16, 500 * (f[0] - f[1]), 200 * (f[1] - f[2])])


def _closest_pair(colours, vision: str) -> float:
    labs = [_lab(c, vision) for c in colours]
    return min(float(np.linalg.norm(a - b)) for a, b in itertools.combinations(labs, 2))


@pytest.mark.parametrize("vision", sorted(_DICHROMACY))
def test_colours_stay_apart_under_simulated_dichromacy(vision):
    """Every pair of line colours, and of regime-map colours, differs by Delta E >= 15
    (CIELAB) for each dichromacy; matplotlib's tab10, the old cycle, does not pass."""
    assert _closest_pair(OKABE_ITO, vision) >= 15
    assert _closest_pair(study_plots._REGIME_COLOURS, vision) >= 15
    assert _closest_pair(study_plots._PREDICTION_COLOURS, vision) >= 15
    if vision in ("protanopia", "deuteranopia"):  # the check can fail: tab10 fails it
        assert _closest_pair(matplotlib.colormaps["tab10"].colors[:4], vision) < 15


# --- panels that carry information ----------------------------------------------------------------
def test_a_constant_panel_is_not_drawn_and_the_title_says_so(tmp_path, monkeypatch):
    csv = tmp_path / "s.csv"
    run_sweep(
        SweepGrid(n=[8], d=[40, 80], kappa=[4.0], methods=["uniform-svm"]),
        csv,
        SweepConfig(n_test=50),
        jobs=1,
    )
    drawn = []
    monkeypatch.setattr(study_plots, "save_figure", lambda fig, path: drawn.append(fig) or path)
    study_plots.plot_curves(
        csv,
        tmp_path / "s.png",
        "d",
        ["test_error_clean", "train_error", "attn_signal_clean"],
        title="t",
        xlabel="$d$",
    )
    (fig,) = drawn
    assert [ax.get_title() for ax in fig.axes] == ["Clean test error"]
    assert re.search(
        r"Not drawn: training error = 0 .*attention, clean training samples = 0\.5",
        fig.get_suptitle(),
    )


def test_the_checker_prediction_is_per_method_and_a_split_vote_is_no_prediction():
    """The checker's constants depend on the method: pooling two methods gave 5-5 ties,
    settled by the order of a set (the figure changed from one run to the next)."""
    rows = [
        {"n": 20.0, "snr": 0.3, "method": m, "snr_regime": r}
        for m, r in [("min-norm", "harmful")] * 2 + [("gd-two-step", "outside the theory")] * 2
    ]
    rows += [
        {"n": 40.0, "snr": 0.3, "method": "min-norm", "snr_regime": r}
        for r in ("benign", "benign", "harmful")
    ]
    assert study_plots.predicted_map(rows) == {
        (20.0, 0.3): "outside the theory",
        (40.0, 0.3): "benign",
    }
    assert study_plots.predicted_map(rows, "min-norm") == {
        (20.0, 0.3): "harmful",
        (40.0, 0.3): "benign",
    }
    assert study_plots.predicted_map(rows, "gd-two-step") == {(20.0, 0.3): "outside the theory"}
