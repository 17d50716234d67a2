"""Multi-process training: 2 CPU ranks (gloo) end with identical weights; torchrun drives the CLI."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import types
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from safetensors.torch import load_file, save_file

from tests.helpers.checkpoints import tiny_config
from visformer.checkpoint import load_checkpoint
from visformer.config import TrainConfig
from visformer.model import Transformer
from visformer.tasks import make_examples, task_tokenizer
from visformer.training import Trainer


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _worker(rank: int, world_size: int, port: int, out: str) -> None:
    """One rank: join the gloo group, train a few steps, write its weights and first batch."""
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world_size)
    torch.set_num_threads(1)
    try:
        tok = task_tokenizer("reverse")
        train = make_examples("reverse", 200, seed=0, max_len=6)
        torch.manual_seed(1234 + rank)  # different initial weights: DDP must broadcast rank 0's
        model = Transformer(
            tiny_config(src_vocab_size=tok.vocab_size, tgt_vocab_size=tok.vocab_size, dropout=0.1)
        )
        cfg = TrainConfig(
            steps=4, max_tokens=96, warmup=2, log_every=1, eval_every=1000, device="cpu", n_snapshots=0
        )
        trainer = Trainer(model, train, train[:4], tok, tok, cfg)
        first = next(trainer._batch_stream()).src
        list(trainer.run())
        state = {k: v.clone() for k, v in trainer.model.state_dict().items() if "token" not in k}
        state["first_batch"] = first
        save_file(state, str(Path(out) / f"rank{rank}.safetensors"))
    finally:
        dist.destroy_process_group()


@pytest.mark.slow
def test_two_cpu_ranks_end_with_identical_weights(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # spawn re-imports the parent's __main__ in each rank; after an AppTest ran app.py in this process that
    # would be the app, so give the ranks a neutral __main__
    monkeypatch.setitem(sys.modules, "__main__", types.ModuleType("__main__"))
    mp.spawn(_worker, args=(2, _free_port(), str(tmp_path)), nprocs=2, join=True)
    a, b = load_file(str(tmp_path / "rank0.safetensors")), load_file(str(tmp_path / "rank1.safetensors"))
    first0, first1 = a.pop("first_batch"), b.pop("first_batch")
    assert first0.shape != first1.shape or not torch.equal(first0, first1)  # data is sharded by rank
    assert a.keys() == b.keys()
    for name in a:
        assert torch.equal(a[name], b[name]), name
    torch.manual_seed(1234)
    tok = task_tokenizer("reverse")
    init = Transformer(tiny_config(src_vocab_size=tok.vocab_size, tgt_vocab_size=tok.vocab_size, dropout=0.1))
    assert not torch.equal(
        init.encoder.layers[0].self_attn.w_q.weight, a["encoder.layers.0.self_attn.w_q.weight"]
    )


@pytest.mark.slow
def test_torchrun_cli_saves_once_from_rank_zero(tmp_path: Path) -> None:
    root = Path(__file__).resolve().parents[1]
    out = tmp_path / "ddp"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2", "--master_port", str(_free_port()),
           "-m", "visformer", "train", "--task", "copy", "--out", str(out), "--steps", "3", "--n-train", "100",
           "--n-valid", "8", "--d-model", "16", "--heads", "2", "--layers", "1", "--d-ff", "32", "--max-len", "32",
           "--max-tokens", "128", "--eval-every", "3", "--snapshots", "2", "--threads", "1", "--no-progress"]  # fmt: skip
    done = subprocess.run(
        cmd, cwd=root, capture_output=True, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"}
    )
    assert done.returncode == 0, done.stderr[-2000:]
    ckpt = load_checkpoint(out)
    assert ckpt.info["world_size"] == 2 and ckpt.info["steps"] == 3
    assert [p.name for p in tmp_path.iterdir()] == ["ddp"]  # one checkpoint, no leftovers from rank 1
