"""explain.positional: the positional-encoding figures, their marks and their language."""

from __future__ import annotations

import numpy as np

from visformer.explain import analysis as an
from visformer.explain import positional


def test_pe_figures() -> None:
    pe = an.pe_matrix(20, 8)
    heat = positional.pe_heatmap(pe, mark_position=3, mark_pair=1)
    assert np.asarray(heat.data[0].z).shape == (20, 8) and len(heat.layout.shapes) == 2
    sin, cos, wl = an.pe_pair(20, 8, 0)
    pair = positional.pe_pair_figure(sin, cos, wl, 0, 8)
    assert len(pair.data) == 2
    assert len([s for s in pair.layout.shapes if s.type == "line"]) == int(19 // wl)  # wavelength marks
    far = positional.pe_pair_figure(*an.pe_pair(20, 8, 3), 3, 8)
    assert "longer than shown" in far.layout.title.text and "wavelength" in pair.layout.title.text
    vec = positional.pe_vector_figure(pe[3], 3)
    assert sum(len(t.x) for t in vec.data) == 8
    binary = positional.binary_figure(an.binary_bits(16), an.pe_matrix(16, 8))
    assert [np.asarray(t.z).shape for t in binary.data] == [(16, 4), (16, 4)]
    for lang in ("en", "ko"):  # side by side, each title on two short lines: on one they ran together
        titles = [
            a.text
            for a in positional.binary_figure(an.binary_bits(4), an.pe_matrix(4, 8), lang).layout.annotations
        ]
        assert len(titles) == 2 and all(title.count("<br>") >= 1 for title in titles), titles
        assert all(len(line) <= 22 for title in titles for line in title.split("<br>")), titles
        note = positional.pe_pair_figure(*an.pe_pair(20, 8, 1), 1, 8, lang=lang).layout.title.text
        assert note.count("<sup>") == 2, note  # the wavelength note on two lines
    ks, dots = an.pe_dot_products(5, 4, 8)
    assert len(positional.dot_product_figure(ks, dots, 5).data[0].x) == len(ks)
    check = an.rotation_check(5, 2, 8)
    assert (
        len(positional.rotation_figure(check.target[:2], check.target[:2], check.rotated[:2], 0, 2).data) == 4
    )
    norms = positional.norms_figure(np.ones(10), an.pe_norm(8))
    assert "2.00" in norms.layout.annotations[0].text
