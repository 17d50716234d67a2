"""visformer.marian: OPUS-MT (Marian) models imported exactly, checked against transformers (no download)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

from tests.helpers.marian import README, SOURCES, build_marian
from visformer.checkpoint import load_checkpoint
from visformer.cli import main
from visformer.decoding import greedy
from visformer.marian import MarianImportError, import_marian, pe_permutation, reported_scores
from visformer.model import positional_encoding

transformers = pytest.importorskip("transformers")

VARIANTS = [("swish", False), ("gelu", False), ("swish", True), ("gelu", True)]


@pytest.fixture(scope="module", params=VARIANTS, ids=lambda v: f"{v[0]}-{'separate' if v[1] else 'shared'}")
def imported(request, tmp_path_factory):
    """(transformers model, its tokenizer, the imported visformer checkpoint) for one variant."""
    torch.set_num_threads(1)
    activation, separate = request.param
    root = tmp_path_factory.mktemp(f"marian-{activation}-{separate}")
    model, tokenizer = build_marian(root / "hf", activation=activation, separate=separate)
    import_marian(str(root / "hf"), root / "visformer")
    return model, tokenizer, load_checkpoint(root / "visformer")


def _src(ckpt, text: str) -> torch.Tensor:
    """Source ids (1, S) with eos, as visformer.decoding.translate builds them."""
    return torch.tensor([[*ckpt.src_tokenizer.encode(text), ckpt.src_tokenizer.eos_id]])


def test_tokenizer_encodes_like_transformers(imported):
    _, tokenizer, ckpt = imported
    for text in [*SOURCES, "트랜스포머 어텐션 zebra!", ">>kor<< 인코더"]:
        assert _src(ckpt, text)[0].tolist() == tokenizer(text).input_ids


def test_logits_equal_transformers_in_fp32(imported):
    model, _, ckpt = imported
    pad = model.config.pad_token_id
    src = torch.cat([_src(ckpt, SOURCES[0]), _src(ckpt, SOURCES[0])])  # (2, S)
    src[1, -3:] = pad  # a padded row: the mask must match transformers' attention_mask
    tgt = torch.tensor([[pad, 5, 9, 3, 7, 4], [pad, 8, 6, 2, 5, 5]])  # (2, T), decoder starts from <pad>
    with torch.no_grad():
        theirs = model(input_ids=src, attention_mask=src.ne(pad), decoder_input_ids=tgt).logits
        ours = ckpt.model(src, tgt).logits
    assert ours.shape == theirs.shape
    assert torch.allclose(ours, theirs, atol=1e-4, rtol=0)


def test_greedy_equals_transformers_generate_token_for_token(imported):
    model, tokenizer, ckpt = imported
    pad = model.config.pad_token_id
    model.generation_config.forced_eos_token_id = None  # visformer does not force eos at the length limit
    for text in SOURCES:
        src = _src(ckpt, text)
        theirs = model.generate(
            input_ids=src, attention_mask=src.ne(pad), max_new_tokens=30, num_beams=1, do_sample=False,
            bad_words_ids=[[pad]],
        )[0, 1:].tolist()  # fmt: skip
        ours = greedy(
            ckpt.model, src, max_len=30, bos_id=ckpt.tgt_tokenizer.bos_id, eos_id=0, precision="fp32"
        )
        assert ours.outputs[0].tokens == theirs
        assert ckpt.tgt_tokenizer.decode(theirs) == tokenizer.decode(theirs, skip_special_tokens=True)


def test_decode_gives_transformers_text(imported):
    _, tokenizer, ckpt = imported
    gen = torch.Generator().manual_seed(0)
    vocab = ckpt.model_config.tgt_vocab_size
    for _ in range(20):
        ids = torch.randint(0, vocab, (8,), generator=gen).tolist()
        assert ckpt.tgt_tokenizer.decode(ids) == tokenizer.decode(ids, skip_special_tokens=True)


def test_cached_decoding_equals_full_decoding(imported):
    _, _, ckpt = imported
    src = _src(ckpt, SOURCES[1])
    start = ckpt.model_config.decoder_start_id
    cached = greedy(ckpt.model, src, max_len=12, bos_id=start, eos_id=0, precision="fp32").outputs[0].tokens
    tgt = [start]
    with torch.no_grad():
        for _ in range(len(cached)):  # the whole prefix again at every step: no cache
            logits = ckpt.model(src, torch.tensor([tgt])).logits[0, -1]  # (V,)
            logits[[ckpt.model_config.pad_id, start]] = -torch.inf
            tgt.append(int(logits.argmax()))
            if tgt[-1] == 0:
                break
    assert cached == tgt[1:]


def test_imported_checkpoint_records_origin_and_the_marian_fields(imported):
    model, _, ckpt = imported
    c = ckpt.model_config
    assert c.activation == model.config.activation_function
    assert c.output_bias and c.decoder_start_id == c.pad_id == model.config.pad_token_id
    assert c.share_embeddings == model.config.share_encoder_decoder_embeddings
    assert c.tie_output == (not c.share_embeddings)
    info = ckpt.info["imported"]
    assert info["license"] == "CC BY 4.0" and "Helsinki-NLP" in info["credit"]
    assert info["trained_by_visformer"] is False
    assert info["reported_scores"] == [{"testset": "toy.ko.en", "bleu": 12.5, "chrf": 0.301}]
    assert ckpt.src_tokenizer.pieces(_src(ckpt, "인코더")[0].tolist())[-1] == "</s>"


def test_checkpoint_folder_holds_no_pickle(imported):
    _, _, ckpt = imported
    suffixes = {p.suffix for p in ckpt.path.rglob("*") if p.is_file()}
    assert suffixes <= {".json", ".safetensors", ".spm"}


def test_pe_permutation_turns_marian_layout_into_the_papers():
    d, positions = 8, torch.arange(5)
    paper = positional_encoding(positions, d)  # (5, d)
    layer = transformers.models.marian.modeling_marian.MarianSinusoidalPositionalEmbedding(16, d)
    marian = layer.create_weight()[:5]  # (5, d): [sines | cosines]
    assert torch.allclose(marian[:, pe_permutation(d)], paper, atol=1e-6)


def test_reported_scores_skip_the_header():
    assert reported_scores(README) == [{"testset": "toy.ko.en", "bleu": 12.5, "chrf": 0.301}]
    assert reported_scores("no table here") == []


# ---------------------------------------------------------------------------------------------
# Refusals: one message, nothing written
# ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def good_folder(tmp_path_factory) -> Path:
    """A valid small Marian folder to damage copies of."""
    folder = tmp_path_factory.mktemp("good") / "hf"
    build_marian(folder)
    return folder


def _refused(tmp_path: Path, source: str, capsys) -> str:
    """Run the CLI on source; assert it fails with one line and writes nothing; return the line."""
    out = tmp_path / "out"
    assert main(["import-marian", source, "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("error: ")
    assert not out.exists() and not [p for p in tmp_path.iterdir() if p.name.startswith(".out")]
    return err


@pytest.mark.parametrize("missing", ["source.spm", "vocab.json", "model.safetensors", "config.json"])
def test_missing_file_is_refused(good_folder, tmp_path, capsys, missing):
    folder = tmp_path / "hf"
    shutil.copytree(good_folder, folder)
    (folder / missing).unlink()
    assert missing in _refused(tmp_path, str(folder), capsys)


def _edited(good_folder: Path, tmp_path: Path, **changes) -> Path:
    """A copy of the good folder with config.json changed."""
    folder = tmp_path / "hf"
    shutil.copytree(good_folder, folder)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, **changes}))
    return folder


@pytest.mark.parametrize(
    "changes, named",
    [
        ({"normalize_before": True}, "normalize_before"),
        ({"layernorm_embedding": True}, "layernorm_embedding"),
        ({"scale_embedding": False}, "scale_embedding"),
        ({"activation_function": "tanh"}, "tanh"),
    ],
)
def test_unsupported_variant_is_refused(good_folder, tmp_path, capsys, changes, named):
    err = _refused(tmp_path, str(_edited(good_folder, tmp_path, **changes)), capsys)
    assert named in err and "post-LN" in err


def test_config_without_a_size_is_refused(good_folder, tmp_path, capsys):
    folder = _edited(good_folder, tmp_path)
    config = json.loads((folder / "config.json").read_text())
    del config["d_model"]
    (folder / "config.json").write_text(json.dumps(config))
    assert "config.json" in _refused(tmp_path, str(folder), capsys)


def test_non_marian_config_is_refused(good_folder, tmp_path, capsys):
    err = _refused(tmp_path, str(_edited(good_folder, tmp_path, model_type="bart")), capsys)
    assert "bart" in err and "Marian" in err


def test_hub_id_offline_gives_one_message(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    err = _refused(tmp_path, "Helsinki-NLP/opus-mt-no-such-model", capsys)
    assert "Helsinki-NLP/opus-mt-no-such-model" in err


def test_refusal_message_in_korean(good_folder, tmp_path):
    with pytest.raises(MarianImportError) as info:
        import_marian(str(_edited(good_folder, tmp_path, model_type="bart")), tmp_path / "out")
    assert "가져올 수 없습니다" in info.value.in_language("ko")


@pytest.mark.parametrize(
    "overrides",
    [
        {"activation": "swish", "output_bias": True},
        {
            "share_embeddings": False,
            "tie_output": True,
            "src_vocab_size": 23,
            "tgt_vocab_size": 31,
            "output_bias": True,
        },
        {"share_embeddings": False, "src_vocab_size": 23, "tgt_vocab_size": 31, "activation": "gelu"},
    ],
)
def test_parameter_count_of_marian_configs_matches_the_built_model(overrides: dict) -> None:
    from visformer.classroom.inputs import count_parameters
    from visformer.config import ModelConfig
    from visformer.model import Transformer

    config = ModelConfig(d_model=16, n_heads=2, n_encoder_layers=1, n_decoder_layers=1, d_ff=32, **overrides)
    assert count_parameters(config) == Transformer(config).num_parameters()


def test_using_the_imported_checkpoint_needs_no_transformers(imported):
    """translate (and so the app and evaluate, which load the same way) with transformers unimportable."""
    import subprocess
    import sys

    _, _, ckpt = imported
    code = (
        "import sys; sys.modules['transformers'] = None; sys.modules['huggingface_hub'] = None\n"
        "from visformer.cli import main\n"
        f"sys.exit(main(['translate', '--checkpoint', {str(ckpt.path)!r}, {SOURCES[0]!r}, '--threads', '1']))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip()
