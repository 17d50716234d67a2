"""RNN seq2seq (no attention, Bahdanau, Luong, dot): attention as data, padding, cache, strategies, checkpoints."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from tests.helpers.checkpoints import tiny_config
from visformer.checkpoint import load_checkpoint, save_checkpoint
from visformer.config import TrainConfig
from visformer.decoding import beam_search, greedy, sample
from visformer.model import HeadMask, Transformer
from visformer.models import RNNSeq2Seq, attention_layers, build_model
from visformer.records import EvalMetrics
from visformer.tasks import make_examples, task_tokenizer
from visformer.training import Trainer

PAD, BOS, EOS = 0, 2, 3
ATTENTIVE = ("rnn-bahdanau", "rnn-luong", "rnn-dot")
ALL_RNN = ("rnn-none", *ATTENTIVE)


def make_rnn(architecture: str, seed: int = 0, **overrides) -> RNNSeq2Seq:
    """A tiny RNN seq2seq in eval mode (d=16, two GRU layers on each side)."""
    torch.manual_seed(seed)
    settings = dict(architecture=architecture, n_encoder_layers=2, n_decoder_layers=2) | overrides
    return build_model(tiny_config(**settings)).eval()


def padded_batch() -> torch.Tensor:
    """Two sources (B=2, S=7): a short one right-padded and a full one."""
    return torch.tensor([[5, 6, 7, EOS, PAD, PAD, PAD], [8, 9, 10, 11, 12, 13, EOS]])


TGT = torch.tensor([[BOS, 5, 6, 7, 8], [BOS, 9, 9, 10, 4]])


@pytest.mark.parametrize("architecture", ATTENTIVE)
def test_attention_rows_sum_to_one_and_ignore_padding(architecture: str) -> None:
    out = make_rnn(architecture)(padded_batch(), TGT, need_weights=True)
    assert out.attention.encoder == [] and out.attention.decoder == []
    (cross,) = out.attention.cross
    assert cross.shape == (2, 1, 5, 7)  # (B, one head, T, S)
    torch.testing.assert_close(cross.sum(-1), torch.ones(2, 1, 5))
    assert (cross[0, :, :, 4:] == 0).all()  # padding gets exactly zero weight
    assert (cross[0, :, :, :4] > 0).all()


@pytest.mark.parametrize("architecture", ALL_RNN)
def test_padding_changes_nothing(architecture: str) -> None:
    model = make_rnn(architecture)
    src = padded_batch()
    batched = model(src, TGT, need_weights=True)
    alone = model(src[:1, :4], TGT[:1], need_weights=True)
    torch.testing.assert_close(batched.logits[:1], alone.logits)
    for b, a in zip(batched.attention.cross, alone.attention.cross, strict=True):
        torch.testing.assert_close(b[:1, :, :, :4], a)


@pytest.mark.parametrize("architecture", ALL_RNN)
def test_incremental_decoding_equals_teacher_forced(architecture: str) -> None:
    model = make_rnn(architecture)
    encoded = model.encode(padded_batch())
    full = model.decode(TGT, encoded, need_weights=True)
    cache = model.new_cache()
    steps = [model.decode(TGT[:, t : t + 1], encoded, cache=cache, need_weights=True) for t in range(5)]
    torch.testing.assert_close(torch.cat([s.logits for s in steps], 1), full.logits)
    assert cache.length == 5
    if architecture != "rnn-none":
        torch.testing.assert_close(
            torch.cat([s.cross_attention[0] for s in steps], 2), full.cross_attention[0]
        )


@pytest.mark.parametrize("architecture", ALL_RNN)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_beam_size_one_is_greedy_and_greedy_follows_argmax(architecture: str, seed: int) -> None:
    model, src = make_rnn(architecture, seed), padded_batch()
    greedy_out = greedy(model, src, max_len=8).outputs
    for g, b in zip(
        greedy_out, beam_search(model, src, beam_size=1, alpha=0.6, max_len=8).outputs, strict=True
    ):
        assert b.tokens == g.tokens
        assert b.best.logprob == pytest.approx(g.best.logprob, abs=1e-4)
    # greedy through the cache equals argmax over full teacher-forced reruns
    for row, out in enumerate(greedy_out):
        tokens = [BOS]
        for _ in out.tokens:
            logits = model(src[row : row + 1], torch.tensor([tokens])).logits[0, -1]
            logits[[PAD, BOS]] = -float("inf")
            tokens.append(int(logits.argmax()))
        assert tokens[1:] == out.tokens


def test_beam_search_and_sampling_run_on_every_rnn() -> None:
    for architecture in ALL_RNN:
        model = make_rnn(architecture)
        beams = beam_search(model, padded_batch(), beam_size=3, n_best=3, max_len=6).outputs
        assert all(len(o.nbest) == 3 for o in beams)
        a = sample(model, padded_batch(), temperature=1.0, seed=7, max_len=6).outputs
        b = sample(model, padded_batch(), temperature=1.0, seed=7, max_len=6).outputs
        assert [o.tokens for o in a] == [o.tokens for o in b]


def test_no_attention_model_returns_no_cross_attention_and_depends_on_the_source() -> None:
    model = make_rnn("rnn-none")
    out = model(padded_batch(), TGT, need_weights=True)
    assert out.attention.cross == [] and not model.has_attention
    other = padded_batch().clone()
    other[0, 0] = 9  # the first source token reaches the decoder only through the final states
    assert not torch.allclose(model(other, TGT).logits[0], out.logits[0])
    assert attention_layers(model.config) == {"encoder": 0, "decoder": 0, "cross": 0}


def test_head_masks_are_refused_with_a_clear_message() -> None:
    model = make_rnn("rnn-luong")
    with pytest.raises(ValueError, match="no.*heads|has none"):
        model(padded_batch(), TGT, head_mask=HeadMask())


def test_unknown_architecture_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown architecture"):
        tiny_config(architecture="lstm")
    with pytest.raises(ValueError, match="RNNSeq2Seq builds"):
        RNNSeq2Seq(tiny_config())


@pytest.mark.parametrize("architecture", ["rnn-none", "rnn-bahdanau"])
def test_checkpoint_round_trip_gives_identical_outputs(tmp_path: Path, architecture: str) -> None:
    tok = task_tokenizer("reverse")
    model = make_rnn(architecture, src_vocab_size=tok.vocab_size, tgt_vocab_size=tok.vocab_size)
    src = torch.tensor([tok.encode("a b c") + [EOS]])
    tgt = torch.tensor([[BOS, *tok.encode("c b a")]])
    ref = model(src, tgt, need_weights=True)
    save_checkpoint(tmp_path / "rnn", model, tok, tok, task="reverse")
    assert json.loads((tmp_path / "rnn" / "config.json").read_text())["model"]["architecture"] == architecture
    loaded = load_checkpoint(tmp_path / "rnn")
    assert isinstance(loaded.model, RNNSeq2Seq) and loaded.model_config == model.config
    out = loaded.model(src, tgt, need_weights=True)
    torch.testing.assert_close(out.logits, ref.logits, rtol=0, atol=0)
    assert len(out.attention.cross) == len(ref.attention.cross)


def test_old_checkpoints_without_architecture_load_as_transformers(tmp_path: Path) -> None:
    tok = task_tokenizer("copy")
    model = Transformer(tiny_config(src_vocab_size=tok.vocab_size, tgt_vocab_size=tok.vocab_size)).eval()
    save_checkpoint(tmp_path / "old", model, tok, tok)
    config_file = tmp_path / "old" / "config.json"
    config = json.loads(config_file.read_text())
    del config["model"]["architecture"]  # as written before the field existed
    config_file.write_text(json.dumps(config))
    loaded = load_checkpoint(tmp_path / "old")
    assert isinstance(loaded.model, Transformer) and loaded.model_config.architecture == "transformer"


def reverse_trainer(architecture: str, steps: int, **overrides) -> Trainer:
    """A d=64 one-layer RNN on the reverse task (3000 training, 100 held-out examples)."""
    tok = task_tokenizer("reverse")
    train = make_examples("reverse", 3000, seed=0, max_len=6)
    valid = make_examples("reverse", 100, seed=99, max_len=6, exclude={ex.src for ex in train})
    torch.manual_seed(0)
    config = tiny_config(
        architecture=architecture, src_vocab_size=tok.vocab_size, tgt_vocab_size=tok.vocab_size, d_model=64,
        max_len=32,
    )  # fmt: skip
    settings = dict(
        steps=steps, max_tokens=512, warmup=200, lr_factor=0.5, label_smoothing=0.0, device="cpu",
        eval_every=100, log_every=50, n_snapshots=2, stop_at_exact_match=1.0, threads=1,
    ) | overrides  # fmt: skip
    return Trainer(build_model(config), train, valid, tok, tok, TrainConfig(**settings), task="reverse")


def test_trainer_trains_an_rnn_and_snapshots_its_cross_attention(tmp_path: Path) -> None:
    trainer = reverse_trainer("rnn-luong", 60, eval_every=60, log_every=10)
    metrics = list(trainer.run())
    losses = [m.loss for m in metrics if not isinstance(m, EvalMetrics)]
    assert losses[-1] < losses[0]
    snap = trainer.snapshots[-1]
    assert snap.attention.encoder == [] and snap.attention.cross[0].shape[1] == 1
    from visformer.checkpoint import save_trainer

    save_trainer(tmp_path / "run", trainer)
    loaded = load_checkpoint(tmp_path / "run")
    assert len(loaded.snapshots) == len(trainer.snapshots)
    torch.testing.assert_close(loaded.snapshots[-1].attention.cross[0], snap.attention.cross[0])


@pytest.mark.slow
def test_bahdanau_rnn_learns_reverse_to_full_held_out_exact_match() -> None:
    trainer = reverse_trainer("rnn-bahdanau", 2500, lr_factor=1.0)  # exact at step 1,000 (at 0.5: 1,700)
    evals = [m for m in trainer.run() if isinstance(m, EvalMetrics)]
    assert evals[-1].exact_match == 1.0
    assert evals[-1].alignment_score > 0.9  # its one head attends where the letter comes from


def test_cli_trains_an_rnn_and_translates_with_it(tmp_path: Path, capsys) -> None:
    from visformer.cli import main

    out = tmp_path / "rnn"
    args = ["train", "--task", "reverse", "--arch", "rnn-bahdanau", "--out", str(out), "--steps", "10",
            "--eval-every", "10", "--n-train", "200", "--n-valid", "20", "--snapshots", "2", "--d-model", "16",
            "--layers", "1", "--max-len", "32", "--max-tokens", "256", "--warmup", "10", "--no-progress"]  # fmt: skip
    assert main(args) == 0
    ckpt = load_checkpoint(out)
    assert isinstance(ckpt.model, RNNSeq2Seq) and ckpt.model_config.architecture == "rnn-bahdanau"
    assert ckpt.snapshots[-1].attention.cross[0].shape[1] == 1
    capsys.readouterr()
    assert main(["translate", "--checkpoint", str(out), "a b c", "--beam-size", "2"]) == 0
    assert capsys.readouterr().out.count("\n") == 1


SHIPPED = Path(__file__).resolve().parents[1] / "checkpoints"


@pytest.mark.slow
def test_shipped_rnn_reverse_checkpoints_and_the_bottleneck() -> None:
    from visformer.evaluation import translate_batch
    from visformer.tasks import exact_match

    held_out = [
        ex for ex in make_examples("reverse", 500, seed=1) if len(ex.src.split()) >= 9
    ]  # the CLI's valid set
    scores = {}
    for arch in ("rnn-bahdanau", "rnn-none"):
        ckpt = load_checkpoint(SHIPPED / f"reverse-{arch}")
        assert ckpt.model_config.architecture == arch and ckpt.info["weights_dtype"] == "float16"
        hyps = translate_batch(
            ckpt.model, ckpt.src_tokenizer, ckpt.tgt_tokenizer, [ex.src for ex in held_out]
        )
        scores[arch] = exact_match(hyps, [ex.tgt for ex in held_out])
        attention = ckpt.model(
            torch.tensor([[5, 6, 7, EOS]]), torch.tensor([[BOS, 7]]), need_weights=True
        ).attention
        assert len(attention.cross) == (arch != "rnn-none")
    assert scores["rnn-bahdanau"] == 1.0
    assert scores["rnn-none"] < 0.9  # one context vector for 9-10 letters: the bottleneck


def test_shipped_multi30k_rnns_translate_and_record_the_bottleneck_by_length() -> None:
    from visformer.decoding import translate
    from visformer.explain.comparison import length_scores

    drop = {}
    for arch in ("rnn-bahdanau", "rnn-none", "transformer"):
        name = "multi30k-en-de" if arch == "transformer" else f"multi30k-en-de-{arch}"
        ckpt = load_checkpoint(SHIPPED / name)
        assert ckpt.model_config.architecture == arch
        out = translate(
            ckpt.model, ckpt.src_tokenizer, ckpt.tgt_tokenizer, "Two dogs are playing in the snow."
        )
        assert "Hunde" in out.text, out.text
        bleu = [b for _, b in length_scores(ckpt.info)]
        assert len(bleu) == 5 and ckpt.info["test"]["bleu"] > 20
        drop[arch] = 1 - bleu[-1] / bleu[0]  # the longest sentences against the shortest
        if arch != "transformer":
            assert ckpt.info["compare_with"] == "multi30k-en-de"
    assert drop["rnn-none"] > drop["rnn-bahdanau"] + 0.1  # one context vector loses most on long sentences


def test_the_app_lists_translation_checkpoints_transformer_and_rnn(tmp_path: Path) -> None:
    from visformer.checkpoint import architecture_of
    from visformer.classroom.catalogue import discover_checkpoints

    tok = task_tokenizer("reverse")
    sizes = dict(src_vocab_size=tok.vocab_size, tgt_vocab_size=tok.vocab_size)
    save_checkpoint(tmp_path / "rnn", make_rnn("rnn-none", **sizes), tok, tok)
    save_checkpoint(tmp_path / "tf", Transformer(tiny_config(**sizes)), tok, tok)
    assert (
        architecture_of(tmp_path / "rnn") == "rnn-none" and architecture_of(tmp_path / "tf") == "transformer"
    )
    assert architecture_of(tmp_path / "missing") == "transformer"
    assert [c.key for c in discover_checkpoints(tmp_path, tmp_path)] == ["rnn", "tf", "yours/rnn", "yours/tf"]
