"""Behaviour of the paper's Transformer: masking, padding, caching, parity, learning."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch
from torch import nn

from tests.helpers.checkpoints import tiny_config
from visformer import (
    HeadMask,
    ModelConfig,
    Transformer,
    apply_pe_rotation,
    pe_rotation,
    positional_encoding,
)


def rand_tokens(b: int, n: int, vocab: int = 20) -> torch.Tensor:
    return torch.randint(3, vocab, (b, n))


def test_config_round_trips_json() -> None:
    cfg = tiny_config(norm_first=True, share_embeddings=False, src_vocab_size=30)
    assert ModelConfig.from_dict(json.loads(json.dumps(cfg.to_dict()))) == cfg  # as a checkpoint stores it


def test_config_rejects_bad_values() -> None:
    with pytest.raises(ValueError, match="divisible"):
        ModelConfig(d_model=10, n_heads=3)
    with pytest.raises(ValueError, match="share_embeddings"):
        ModelConfig(src_vocab_size=5, tgt_vocab_size=6, share_embeddings=True)
    with pytest.raises(ValueError, match="unknown"):
        ModelConfig.from_dict({"d_model": 16, "colour": "red"})


def test_positional_encoding_matches_formula() -> None:
    d = 16
    pe = positional_encoding(torch.arange(50), d)
    for pos in (0, 7, 49):
        for i in range(d // 2):
            angle = pos / 10000 ** (2 * i / d)
            assert pe[pos, 2 * i].item() == pytest.approx(torch.tensor(angle).sin().item(), abs=1e-6)
            assert pe[pos, 2 * i + 1].item() == pytest.approx(torch.tensor(angle).cos().item(), abs=1e-6)


@pytest.mark.parametrize("k", [1, 5, 17, -3])
def test_rotation_identity(k: int) -> None:
    d = 32
    pos = torch.arange(0, 40)
    pe = positional_encoding(pos, d)
    shifted = positional_encoding(pos + k, d)
    assert torch.allclose(apply_pe_rotation(pe, k), shifted, atol=1e-5)
    m = pe_rotation(k, d)
    assert m.shape == (d // 2, 2, 2)
    # each M_k is a rotation: orthogonal with determinant 1
    eye = torch.eye(2).expand(d // 2, 2, 2)
    assert torch.allclose(m @ m.transpose(-1, -2), eye, atol=1e-6)


def test_causal_masking_leaks_nothing(tiny_model: Transformer) -> None:
    src, tgt = rand_tokens(2, 7), rand_tokens(2, 6)
    base = tiny_model(src, tgt).logits
    for j in range(1, 6):
        changed = tgt.clone()
        changed[:, j] = (changed[:, j] + 1 - 3) % 17 + 3
        out = tiny_model(src, changed).logits
        assert torch.allclose(out[:, :j], base[:, :j], atol=1e-6)
        assert not torch.allclose(out[:, j:], base[:, j:], atol=1e-6)


def test_padding_changes_nothing(tiny_model: Transformer) -> None:
    src, tgt = rand_tokens(1, 5), rand_tokens(1, 4)
    padded = torch.cat([src, torch.zeros(1, 3, dtype=torch.long)], dim=1)
    a = tiny_model(src, tgt, need_weights=True)
    b = tiny_model(padded, tgt, need_weights=True)
    assert torch.allclose(a.logits, b.logits, atol=1e-5)
    for enc_a, enc_b in zip(a.attention.encoder, b.attention.encoder, strict=True):
        assert torch.all(enc_b[..., 5:] == 0)  # no query attends to a pad key
        assert torch.allclose(enc_b[..., :5, :5], enc_a, atol=1e-5)
    for cross in b.attention.cross:
        assert torch.all(cross[..., 5:] == 0)


def test_attention_rows_sum_to_one_and_decoder_is_causal(tiny_model: Transformer) -> None:
    out = tiny_model(rand_tokens(3, 6), rand_tokens(3, 5), need_weights=True)
    maps = out.attention
    assert len(maps.encoder) == len(maps.decoder) == len(maps.cross) == 2
    for w in maps.encoder + maps.decoder + maps.cross:
        assert torch.allclose(w.sum(-1), torch.ones(w.shape[:-1]), atol=1e-5)
    for w in maps.decoder:
        assert w.shape == (3, 4, 5, 5)
        assert torch.all(torch.triu(w, diagonal=1) == 0)
    assert maps.cross[0].shape == (3, 4, 5, 6)


def test_fast_path_equals_weights_path(tiny_model: Transformer) -> None:
    src = torch.cat([rand_tokens(2, 6), torch.zeros(2, 2, dtype=torch.long)], 1)
    tgt = rand_tokens(2, 5)
    fast = tiny_model(src, tgt).logits
    slow = tiny_model(src, tgt, need_weights=True).logits
    assert torch.allclose(fast, slow, atol=1e-5)


def test_cached_decoding_equals_full_decoding(tiny_model: Transformer) -> None:
    src, tgt = rand_tokens(2, 7), rand_tokens(2, 6)
    enc = tiny_model.encode(src)
    full = tiny_model.decode(tgt, enc).logits
    cache = tiny_model.new_cache()
    steps = [tiny_model.decode(tgt[:, t : t + 1], enc, cache=cache).logits for t in range(6)]
    assert cache.length == 6
    assert torch.allclose(torch.cat(steps, 1), full, atol=1e-5)
    # a chunk of several new tokens after a cached prefix gives the same as well
    cache = tiny_model.new_cache()
    first = tiny_model.decode(tgt[:, :2], enc, cache=cache, need_weights=True)
    rest = tiny_model.decode(tgt[:, 2:], enc, cache=cache, need_weights=True)
    assert torch.allclose(torch.cat([first.logits, rest.logits], 1), full, atol=1e-5)
    assert rest.self_attention[0].shape == (2, 4, 4, 6)


def test_cross_kv_computed_once(tiny_model: Transformer) -> None:
    enc = tiny_model.encode(rand_tokens(1, 4))
    cache = tiny_model.new_cache()
    tiny_model.decode(rand_tokens(1, 1), enc, cache=cache)
    k0 = cache.layers[0].cross_k
    tiny_model.decode(rand_tokens(1, 1), enc, cache=cache)
    assert cache.layers[0].cross_k is k0


def test_head_mask_switches_a_head_off(tiny_model: Transformer) -> None:
    src, tgt = rand_tokens(1, 6), rand_tokens(1, 5)
    base = tiny_model(src, tgt).logits
    ones = HeadMask.ones(tiny_model.config)
    assert torch.allclose(tiny_model(src, tgt, head_mask=ones).logits, base, atol=1e-6)
    off = HeadMask.ones(tiny_model.config)
    off.cross[1, 2] = 0.0
    assert not torch.allclose(tiny_model(src, tgt, head_mask=off).logits, base, atol=1e-4)
    # switching a head off equals zeroing its slice of the concatenated heads before W^O
    layer = tiny_model.decoder.layers[1].cross_attn
    x, mem = torch.randn(1, 3, 16), torch.randn(1, 4, 16)
    hm = torch.tensor([1.0, 1.0, 0.0, 1.0])
    masked, _ = layer(x, mem, head_mask=hm)
    with torch.no_grad():
        saved = layer.w_o.weight[:, 8:12].clone()
        layer.w_o.weight[:, 8:12] = 0
        ref, _ = layer(x, mem)
        layer.w_o.weight[:, 8:12] = saved
    assert torch.allclose(masked, ref, atol=1e-6)


def _copy_into_torch_transformer(model: Transformer) -> nn.Transformer:
    """Build nn.Transformer (post-LN, no final norms) holding the same weights."""
    cfg = model.config
    ref = nn.Transformer(
        d_model=cfg.d_model,
        nhead=cfg.n_heads,
        num_encoder_layers=cfg.n_encoder_layers,
        num_decoder_layers=cfg.n_decoder_layers,
        dim_feedforward=cfg.d_ff,
        dropout=0.0,
        batch_first=True,
        norm_first=False,
    )
    ref.encoder.norm = None
    ref.decoder.norm = None

    def copy_mha(dst: nn.MultiheadAttention, src) -> None:
        dst.in_proj_weight.copy_(torch.cat([src.w_q.weight, src.w_k.weight, src.w_v.weight]))
        dst.in_proj_bias.copy_(torch.cat([src.w_q.bias, src.w_k.bias, src.w_v.bias]))
        dst.out_proj.weight.copy_(src.w_o.weight)
        dst.out_proj.bias.copy_(src.w_o.bias)

    with torch.no_grad():
        for dst, src in zip(ref.encoder.layers, model.encoder.layers, strict=True):
            copy_mha(dst.self_attn, src.self_attn)
            dst.linear1.load_state_dict(src.feed_forward.linear1.state_dict())
            dst.linear2.load_state_dict(src.feed_forward.linear2.state_dict())
            dst.norm1.load_state_dict(src.sublayer1.norm.state_dict())
            dst.norm2.load_state_dict(src.sublayer2.norm.state_dict())
        for dst, src in zip(ref.decoder.layers, model.decoder.layers, strict=True):
            copy_mha(dst.self_attn, src.self_attn)
            copy_mha(dst.multihead_attn, src.cross_attn)
            dst.linear1.load_state_dict(src.feed_forward.linear1.state_dict())
            dst.linear2.load_state_dict(src.feed_forward.linear2.state_dict())
            dst.norm1.load_state_dict(src.sublayer1.norm.state_dict())
            dst.norm2.load_state_dict(src.sublayer2.norm.state_dict())
            dst.norm3.load_state_dict(src.sublayer3.norm.state_dict())
    return ref.eval()


def test_parity_with_torch_nn_transformer() -> None:
    model = Transformer(tiny_config(d_model=32, n_encoder_layers=2, n_decoder_layers=2, d_ff=64)).eval()
    ref = _copy_into_torch_transformer(model)
    src = torch.cat([rand_tokens(2, 7), torch.zeros(2, 2, dtype=torch.long)], 1)
    tgt = rand_tokens(2, 6)
    with torch.no_grad():
        enc = model.encode(src)
        x_src = model.src_embed(src)
        ref_mem = ref.encoder(x_src, src_key_padding_mask=src == 0)
        real = src != 0
        assert torch.allclose(enc.memory[real], ref_mem[real], atol=1e-5)
        dec_in = model.tgt_embed(tgt)
        ours = model.decoder(dec_in, enc.memory, enc.src_mask)[0]
        theirs = ref.decoder(
            dec_in,
            enc.memory,
            tgt_mask=nn.Transformer.generate_square_subsequent_mask(6),
            memory_key_padding_mask=src == 0,
            tgt_is_causal=True,
        )
        assert torch.allclose(ours, theirs, atol=1e-5)


def test_pre_ln_variant_runs_and_differs() -> None:
    torch.manual_seed(1)
    post = Transformer(tiny_config()).eval()
    torch.manual_seed(1)
    pre = Transformer(tiny_config(norm_first=True)).eval()
    src, tgt = rand_tokens(1, 5), rand_tokens(1, 4)
    assert not torch.allclose(post(src, tgt).logits, pre(src, tgt).logits)


def test_shared_embeddings_are_tied() -> None:
    model = Transformer(tiny_config())
    assert model.src_embed.token.weight is model.tgt_embed.token.weight is model.generator.weight
    separate = Transformer(tiny_config(share_embeddings=False, src_vocab_size=30))
    assert separate.src_embed.token.weight.shape == (30, 16)
    assert separate.generator.weight is not separate.tgt_embed.token.weight


def test_embedding_scale_does_not_drown_positions() -> None:
    model = Transformer(tiny_config(d_model=64, n_heads=4))
    emb_norm = (model.src_embed.token.weight[1:] * model.src_embed.scale).norm(dim=-1).mean()
    pe_norm = positional_encoding(torch.arange(20), 64).norm(dim=-1).mean()
    assert 0.5 < (emb_norm / pe_norm).item() < 2.0


def test_overfits_tiny_copy_task() -> None:
    torch.manual_seed(0)
    model = Transformer(tiny_config(d_model=32, d_ff=64, n_heads=4))
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    src = torch.randint(3, 20, (16, 6))
    bos = torch.ones(16, 1, dtype=torch.long)
    tgt_in, tgt_out = torch.cat([bos, src], 1), torch.cat([src, 2 * bos], 1)
    losses = []
    for _ in range(200):
        logits = model(src, tgt_in).logits
        loss = nn.functional.cross_entropy(logits.reshape(-1, 20), tgt_out.reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0] / 10


def test_package_never_imports_streamlit() -> None:
    code = (
        "import sys, visformer, pkgutil, importlib\n"
        "for m in pkgutil.walk_packages(visformer.__path__, 'visformer.'):\n"
        "    importlib.import_module(m.name)\n"
        "assert 'streamlit' not in sys.modules, 'visformer imported streamlit'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.parametrize("norm_first", [False, True])
def test_recorded_intermediates_are_what_the_forward_pass_computed(norm_first: bool) -> None:
    torch.manual_seed(0)
    model = Transformer(tiny_config(n_encoder_layers=2, n_decoder_layers=2, norm_first=norm_first)).eval()
    src, tgt = rand_tokens(2, 6), rand_tokens(2, 5)
    plain = model(src, tgt)
    out = model(src, tgt, need_weights=True, record=True)
    torch.testing.assert_close(out.logits, plain.logits)
    enc, dec = out.intermediates.encoder, out.intermediates.decoder
    assert len(enc) == len(dec) == 2 and len(dec[0].sublayers) == 3 and len(dec[0].attention) == 2
    torch.testing.assert_close(enc[1].input, enc[0].output)  # one layer's output is the next one's input
    torch.testing.assert_close(enc[0].input, model.src_embed(src))
    for i, layer in enumerate(dec):
        torch.testing.assert_close(layer.self_attn.weights, out.attention.decoder[i])
        torch.testing.assert_close(layer.cross_attn.weights, out.attention.cross[i])
    attn, first = model.encoder.layers[0].self_attn, enc[0].sublayers[0]
    seen = first.normed if norm_first else first.input  # what the attention read
    torch.testing.assert_close(enc[0].self_attn.q, attn.split_heads(attn.w_q(seen)))
    torch.testing.assert_close(enc[0].self_attn.output, first.output)
    torch.testing.assert_close(model.generator(model.decoder.norm(dec[-1].output)), out.logits)
    assert enc[0].ffn_hidden.shape == (2, 6, model.config.d_ff)
    assert model(src, tgt).intermediates is None


def test_head_mask_ones_follows_the_architectures_attention_kinds() -> None:
    """A Transformer gets every kind at its layer counts; a GRU seq2seq has no encoder or decoder self-attention."""
    from visformer.config import ModelConfig

    paper = HeadMask.ones(
        ModelConfig(src_vocab_size=20, tgt_vocab_size=20, n_encoder_layers=2, n_decoder_layers=3)
    )
    assert paper.encoder.shape == (2, 8) and paper.decoder.shape == (3, 8) and paper.cross.shape == (3, 8)
    rnn = HeadMask.ones(ModelConfig(src_vocab_size=20, tgt_vocab_size=20, architecture="rnn-bahdanau"))
    assert rnn.encoder is None and rnn.decoder is None and rnn.cross is not None
