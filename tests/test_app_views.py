"""pages/_views.py: URL parameters of every page parsed, validated and written back without defaults."""

from __future__ import annotations

from pages import _views as schema
from visformer.decoding import STRATEGIES
from visformer.explain.decoding import DEFAULT_STRATEGIES


def test_parse_view_validates_every_parameter() -> None:
    good = schema.parse_view(
        {"layer": "2", "view": "encoder", "ablate": "c1.0,e0.1,e0.1", "sentence": " hi\x07 "}
    )
    assert good["layer"] == 2 and good["view"] == "encoder"
    assert good["ablate"] == ("c1.0", "e0.1") and good["sentence"] == "hi"
    bad = schema.parse_view({"layer": "x", "view": "?", "ablate": "e0", "pe_len": ["20", "5000"]})
    assert bad["layer"] == 0 and bad["view"] == "cross" and bad["ablate"] == ()
    assert bad["pe_len"] == 1000  # repeated key: the last one, clipped into range
    # the Attention page's tabs by id; a link from before the ids (an English label) opens the same tab
    assert (
        schema.parse_view({"tab": "inside"})["tab"]
        == schema.parse_view({"tab": "Inside one head"})["tab"]
        == "inside"
    )
    assert (
        schema.parse_view({"sentence": "x" * 3000})["sentence"] == "x" * 3000
    )  # the page cuts it, saying so


def test_url_params_leave_defaults_out() -> None:
    values = schema.parse_view({})
    values.update(checkpoint="m", layer=3, ablate=["e0.1"])
    assert schema.url_params(values, ["checkpoint", "sentence", "layer", "head", "ablate"]) == {
        "checkpoint": "m",
        "layer": "3",
        "ablate": "e0.1",
    }


def test_decoding_and_timeline_parameters_are_validated() -> None:
    good = schema.parse_view(
        {"dec_strategies": "top-p,beam,top-p", "dec_beam_alpha": "1.3", "dec_beam_beam_size": "99",
         "tl_average": "1", "tl_step": "12", "dec_tab": "samples"}
    )  # fmt: skip
    assert good["dec_strategies"] == ("top-p", "beam")  # order kept, repeats dropped
    assert (
        good["dec_beam_alpha"] == 1.3 and good["dec_beam_beam_size"] == 16
    )  # clipped to the strategy's range
    assert good["tl_average"] is True and good["tl_step"] == 12 and good["dec_tab"] == "samples"
    bad = schema.parse_view(
        {"dec_strategies": "beam,nope", "dec_beam_alpha": "nan", "dec_top-p_top_p": "inf", "tl_average": "maybe",
         "dec_tab": "Beam", "dec_seed": "1.5", "dec_step_strategy": ""}
    )  # fmt: skip
    assert bad["dec_strategies"] == DEFAULT_STRATEGIES and bad["dec_beam_alpha"] == 0.6
    assert bad["dec_top-p_top_p"] == 0.9 and bad["tl_average"] is False and bad["dec_tab"] == "steps"
    assert (
        schema.parse_view({"dec_tab": "Beam search tree"})["dec_tab"] == "beam"
    )  # a link from before the ids
    assert bad["dec_seed"] == 0 and bad["dec_step_strategy"] == "greedy"
    every = {schema.decoding_param_key(s.name, p.name) for s in STRATEGIES.values() for p in s.params}
    assert every <= set(schema.VIEW_PARAMS)  # every strategy parameter can be linked
    values = {**schema.parse_view({}), "dec_strategies": ["beam", "greedy"], "dec_beam_alpha": 0.1 + 0.2}
    assert schema.url_params(values, ["dec_strategies", "dec_beam_alpha", "tl_average"]) == {
        "dec_strategies": "beam,greedy",  # in the order chosen (the comparison table's order)
        "dec_beam_alpha": "0.3",  # without float noise
    }
