"""Train page: pick data and a model size, train in the background, watch the curves, keep the checkpoint."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import streamlit as st

from pages import _loading as loading
from pages import _state as session
from pages import _widgets as widgets
from visformer import recipes
from visformer.classroom import catalogue, jobs
from visformer.classroom.hosting import BusyError, HostedLimits
from visformer.classroom.inputs import checkpoint_name, parse_uploaded_parallel, parse_uploaded_tsv
from visformer.config import TrainConfig
from visformer.data import Pair
from visformer.download import DATA_ENV, SHARED_DATA
from visformer.explain import training as tfig
from visformer.explain import views as sup
from visformer.tasks import TASKS

session.ensure_frame()

SOURCES = ["Built-in task", "Upload a corpus", "Corpus on disk"]
SIZES = [*recipes.PRESETS, "custom"]
BATCH_TOKENS = [256, 512, 1024, 2048, 4096, 8192]
STEP_OPTIONS = [10, 20, 50, 100, 200, 300, 400, 600, 800, 1000, 1500, 2000, 3000, 5000, 10_000, 20_000]
WARMUP_OPTIONS = [1, 10, 20, 50, 100, 200, 300, 500, 1000, 2000, 4000]
POLL_SECONDS = 1.0
STATE_TEXT = {
    jobs.PREPARING: "Preparing data, tokenizer and model…",
    jobs.RUNNING: "Training…",
    jobs.STOPPING: "Stopping after the current step…",
    jobs.SAVING: "Saving the checkpoint…",
}
DEFAULTS = {
    "train_source": SOURCES[0],
    "train_task": "copy",
    "train_upload_kind": "Two aligned files",
    "train_vocab": 1000,
    "train_size": "tiny",
    "train_d_model": 64,
    "train_heads": 4,
    "train_layers": 2,
    "train_d_ff": 256,
    "train_steps": 600,
    "train_warmup": 100,
    "train_factor": 1.0,
    "train_batch": 1024,
    "train_seed": 0,
}

# ---------------------------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------------------------


def data_roots() -> list[Path]:
    """Folders searched for corpora on disk: $VISFORMER_DATA, then ../shared/data."""
    import os

    roots = [Path(os.environ[DATA_ENV])] if os.environ.get(DATA_ENV) else []
    return [*roots, SHARED_DATA]


@st.cache_data(max_entries=4, show_spinner=False)
def corpora() -> list[jobs.DiskCorpus]:
    """Corpora found under the data roots."""
    return [c for root in data_roots() for c in jobs.find_corpora(root)]


@st.cache_data(max_entries=8, show_spinner="Reading the corpus…")
def disk_pairs(corpus: jobs.DiskCorpus, _limits: HostedLimits, max_lines: int) -> list[Pair]:
    """Pairs of a corpus on disk (keyed on the corpus and the line limit)."""
    return jobs.read_corpus(corpus, _limits)


@st.cache_data(max_entries=8, show_spinner="Reading your files…")
def upload_pairs(files: tuple[tuple[str, bytes], ...], _limits: HostedLimits, max_bytes: int) -> list[Pair]:
    """Pairs of uploaded files: one TSV or two aligned files (clear errors on bad files)."""
    if len(files) == 1:
        ((name, data),) = files
        return parse_uploaded_tsv(data, _limits, name)
    (src_name, src), (tgt_name, tgt) = files
    return parse_uploaded_parallel(src, tgt, _limits, src_name, tgt_name)


def preview(pairs: list[Pair], n: int = 3) -> None:
    """How many pairs and the first few."""
    st.success(f"{len(pairs):,} sentence pairs.")
    st.dataframe(pd.DataFrame([{"source": p.src, "target": p.tgt} for p in pairs[:n]]), hide_index=True)


# ---------------------------------------------------------------------------------------------
# Settings
# ---------------------------------------------------------------------------------------------


def source_settings(limits: HostedLimits) -> tuple[recipes.DataSource | None, str]:
    """What to learn: (data source or None when not ready, a short name for the checkpoint)."""
    kind = st.radio(
        "What to learn", SOURCES, key="train_source", persist_state=session.PERSIST, horizontal=True
    )
    if kind == SOURCES[0]:
        task = st.selectbox("Task", list(TASKS), key="train_task", persist_state=session.PERSIST)
        st.caption(TASKS[task].description)
        return recipes.TaskSource(task), task
    vocab_high = min(8000, limits.max_vocab_size)
    st.session_state["train_vocab"] = sup.clamp(st.session_state["train_vocab"], 300, vocab_high)
    if kind == SOURCES[1]:
        pairs, name = upload_settings(limits)
    else:
        pairs, name = disk_settings(limits)
    st.slider("Vocabulary size (SentencePiece, shared by both languages)", 300, vocab_high, step=100,
              key="train_vocab", persist_state=session.PERSIST)  # fmt: skip
    if pairs is None:
        return None, name
    return recipes.PairsSource(name, tuple(pairs), vocab_size=st.session_state["train_vocab"]), name


def upload_settings(limits: HostedLimits) -> tuple[list[Pair] | None, str]:
    """Uploaded pairs (None until valid files are given) and their name."""
    form = st.radio("Format", ["Two aligned files", "One TSV file"], key="train_upload_kind", horizontal=True,
                    persist_state=session.PERSIST)  # fmt: skip
    mb = limits.max_upload_bytes // 2**20
    if form == "One TSV file":
        st.caption(f"One pair per line: source<TAB>target (extra columns are ignored). At most {mb} MB.")
        upload = st.file_uploader("TSV file", key="train_tsv", max_upload_size=mb)
        files = (upload,) if upload is not None else ()
        wanted = 1
    else:
        st.caption(f"Line i of the source file translates line i of the target file. At most {mb} MB each.")
        left, right = st.columns(2)
        src = left.file_uploader("Source sentences", key="train_src_file", max_upload_size=mb)
        tgt = right.file_uploader("Target sentences", key="train_tgt_file", max_upload_size=mb)
        files = tuple(f for f in (src, tgt) if f is not None)
        wanted = 2
    if len(files) < wanted:
        st.info("Upload the file(s) to continue.")
        return None, "corpus"
    try:
        pairs = upload_pairs(tuple((f.name, f.getvalue()) for f in files), limits, limits.max_upload_bytes)
    except ValueError as exc:
        st.error(str(exc))
        return None, "corpus"
    preview(pairs)
    return pairs, Path(files[0].name).stem


def disk_settings(limits: HostedLimits) -> tuple[list[Pair] | None, str]:
    """Pairs of a corpus found on disk (None when there is none) and its name."""
    found = corpora()
    if not found:
        st.info(
            f"No corpus found in {', '.join(str(r) for r in data_roots())}. Set {DATA_ENV} to a folder of corpora."
        )
        return None, "corpus"
    names = [c.name for c in found]
    if st.session_state.get("train_corpus") not in names:
        st.session_state["train_corpus"] = names[0]
    name = st.selectbox("Corpus", names, key="train_corpus", persist_state=session.PERSIST)
    try:
        pairs = disk_pairs(found[names.index(name)], limits, limits.max_upload_lines)
    except ValueError as exc:
        st.error(str(exc))
        return None, "corpus"
    preview(pairs)
    return pairs, name.split("/")[0]


def size_settings(limits: HostedLimits) -> recipes.ModelSize:
    """A preset or custom model size (custom sizes are bounded by the limits)."""
    state = st.session_state
    preset = st.radio("Model size", SIZES, key="train_size", persist_state=session.PERSIST, horizontal=True)
    if preset != "custom":
        size = recipes.PRESETS[preset]
        st.caption(f"d_model {size.d_model}, {size.n_heads} heads, {size.n_layers}+{size.decoder_layers} layers, "
                   f"d_ff {size.d_ff}")  # fmt: skip
        return size
    heads = [h for h in (1, 2, 4, 8, 16) if h <= limits.max_heads]
    if state["train_heads"] not in heads:
        state["train_heads"] = heads[-1]
    c1, c2 = st.columns(2)
    h = c1.select_slider("Heads h", heads, key="train_heads", persist_state=session.PERSIST)
    d_high = max(h * 2, min(512, limits.max_d_model) // (2 * h) * 2 * h)
    state["train_d_model"] = sup.clamp(state["train_d_model"] // (2 * h) * (2 * h), 2 * h, d_high)
    d_model = c2.slider("d_model", 2 * h, d_high, step=2 * h, key="train_d_model", persist_state=session.PERSIST,
                        help="A multiple of 2h, so every head gets an even d_k = d_model / h.")  # fmt: skip
    state["train_layers"] = sup.clamp(state["train_layers"], 1, min(6, limits.max_layers))
    layers = c1.slider("Layers (each side)", 1, min(6, limits.max_layers), key="train_layers",
                       persist_state=session.PERSIST)  # fmt: skip
    ff_high = min(2048, limits.max_d_ff)
    state["train_d_ff"] = sup.clamp(state["train_d_ff"] // 16 * 16, 16, ff_high)
    d_ff = c2.slider("d_ff", 16, ff_high, step=16, key="train_d_ff", persist_state=session.PERSIST)
    return recipes.ModelSize(d_model, h, layers, d_ff)


def schedule_settings(limits: HostedLimits, d_model: int) -> TrainConfig:
    """Steps, warm-up, learning-rate factor, batch size and seed, with the Noam schedule drawn."""
    state = st.session_state
    step_options = [s for s in STEP_OPTIONS if s <= limits.max_steps] or [limits.max_steps]
    if state["train_steps"] not in step_options:
        state["train_steps"] = max(s for s in step_options if s <= max(state["train_steps"], step_options[0]))
    if state["train_warmup"] not in WARMUP_OPTIONS:
        state["train_warmup"] = DEFAULTS["train_warmup"]
    left, right = st.columns([1, 1.3])
    with left:
        steps = st.select_slider(
            "Training steps", step_options, key="train_steps", persist_state=session.PERSIST
        )
        warmup = st.select_slider("Warm-up steps", WARMUP_OPTIONS, key="train_warmup", persist_state=session.PERSIST,
                                  help="The paper used 4000 for 100k steps; short runs need a short warm-up.")  # fmt: skip
        factor = st.slider(
            "Learning-rate factor", 0.1, 5.0, step=0.1, key="train_factor", persist_state=session.PERSIST
        )
        c1, c2 = st.columns(2)
        batch = c1.select_slider(
            "Batch (tokens)", BATCH_TOKENS, key="train_batch", persist_state=session.PERSIST
        )
        seed = c2.number_input("Seed", 0, 2**31 - 1, key="train_seed", persist_state=session.PERSIST)
    with right:
        widgets.chart(tfig.noam_figure(d_model, warmup, factor, steps), "noam-schedule", key="noam")
    return TrainConfig(
        steps=steps, warmup=warmup, lr_factor=factor, max_tokens=batch, seed=int(seed), threads=1,
        log_every=max(1, steps // 100), eval_every=max(1, steps // 5), eval_examples=100,
    )  # fmt: skip


# ---------------------------------------------------------------------------------------------
# The run
# ---------------------------------------------------------------------------------------------


def start(spec: recipes.RunSpec, limits: HostedLimits, root: Path) -> None:
    """Start a run in the background (errors end up in the page's message slot)."""
    try:
        jobs.REGISTRY.start(session.session_id(), spec, limits, root)
        st.session_state["_train_polling"] = True
    except (BusyError, ValueError) as exc:
        st.session_state["_train_error"] = str(exc)


def open_checkpoint(key: str) -> None:
    """Pick a checkpoint in the sidebar (a callback: runs before the sidebar widget is drawn)."""
    st.session_state["checkpoint"] = key


def progress_view() -> None:
    """Live progress of this session's run; re-runs on its own every second while the run is active."""
    job = jobs.REGISTRY.get(session.session_id())
    if job is None:
        return
    p = job.progress()
    state = st.session_state
    if not p.active and state.get("_train_polling"):
        state["_train_polling"] = False
        st.rerun()  # the whole page: the new checkpoint appears in the sidebar and polling stops
    st.subheader(f"Run “{job.spec.name}”")
    if p.active:
        st.progress(p.fraction, text=f"{STATE_TEXT[p.state]} step {p.step:,} of {p.total_steps:,}")
        st.button("Stop", key="train_stop", icon=":material/stop_circle:", on_click=job.stop,
                  help="End after the current step and save what was learned.")  # fmt: skip
    if p.history:
        last = p.history[-1]
        m = st.columns(5)
        m[0].metric("Step", f"{p.step:,} / {p.total_steps:,}")
        m[1].metric("Loss", f"{last.loss:.3f}")
        m[2].metric("Learning rate", f"{last.lr:.2e}")
        m[3].metric("Tokens / s", f"{last.tokens_per_s:,.0f}")
        m[4].metric("Time", f"{p.elapsed_s:,.0f} s")
        evals = p.evals
        widgets.chart(
            tfig.curves_figure(
                [h.step for h in p.history], [h.loss for h in p.history], [h.lr for h in p.history],
                valid_steps=[e.step for e in evals], valid_losses=[e.valid_loss for e in evals],
                total_steps=p.total_steps,
            ),
            "training-curves", key="train-curves",
        )  # fmt: skip
        if evals:
            examples_view(evals[-1])
    if not p.active:
        finished_view(p, job.spec.name)


def examples_view(ev) -> None:
    """The model's current outputs on a few validation sentences."""
    scores = []
    if ev.exact_match is not None:
        scores.append(f"exact match {ev.exact_match:.0%}")
    if ev.alignment_score is not None:
        scores.append(f"best head's alignment {ev.alignment_score:.0%}")
    if ev.bleu is not None:
        scores.append(f"BLEU {ev.bleu:.1f}")
    st.markdown(f"**Outputs at step {ev.step:,}** (validation loss {ev.valid_loss:.3f}" +
                "".join(f", {s}" for s in scores) + ")")  # fmt: skip
    rows = [{"source": s, "reference": r, "model output": o or "(empty)"} for s, r, o in ev.samples]
    st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch")


def finished_view(p: jobs.Progress, name: str) -> None:
    """The outcome: where the checkpoint is and buttons to open it."""
    if p.state == jobs.FAILED and p.checkpoint is None:
        st.error(f"Training failed: {p.message}")
        return
    if p.checkpoint is None:
        st.info(p.message or "Nothing was saved.")
        return
    key = catalogue.USER_PREFIX + p.checkpoint.name
    text = (
        f"Saved as **{p.checkpoint.name}** after {p.step:,} steps; it is in the sidebar's checkpoint picker."
    )
    (st.warning if p.state == jobs.FAILED else st.success)(f"{p.message}. {text}" if p.message else text)
    c1, c2 = st.columns(2)
    if c1.button("Open it on the Attention page", key="train_open", on_click=open_checkpoint, args=(key,),
                 icon=":material/grid_view:", type="primary"):  # fmt: skip
        st.switch_page("pages/attention.py")
    if c2.button("Replay its attention timeline", key="train_open_timeline", on_click=open_checkpoint, args=(key,),
                 icon=":material/movie:"):  # fmt: skip
        st.switch_page("pages/timeline.py")


def fast_recipe(
    where, source: recipes.TaskSource, raw_name: str, seed: int, limits: HostedLimits, root: Path, ready: bool
) -> None:
    """The benchmark's recipe for a toy task, described (size, parameters, name) as it will be trained."""
    try:
        spec = recipes.toy_spec(
            checkpoint_name(raw_name or f"{source.task}-fast"), source.task, min(3000, limits.max_steps), seed
        )
        n_params = jobs.check_spec(spec, limits, source.vocab_size)
    except ValueError as exc:
        where.caption(f"Fast recipe not available here: {exc}")
        return
    size = spec.size
    target = spec.train.stop_at_exact_match
    stop_rule = f"stops at the first evaluation with {target:.1%} held-out exact match" if target else ""
    if where.button(
        "Fast recipe", key="train_fast", icon=":material/bolt:", disabled=not ready,
        help=f"Ignore the settings above and use the benchmark's recipe (pre-LN, no dropout, Noam "
        f"{spec.train.warmup} × {spec.train.lr_factor}); it {stop_rule}, about half a minute for the reverse "
        "task on a laptop.",
    ):  # fmt: skip
        start(spec, limits, root)
        st.rerun()
    where.caption(
        f"Fast recipe: d_model {size.d_model}, {size.n_heads} heads, {size.n_layers}+{size.decoder_layers} layers, "
        f"d_ff {size.d_ff}; {n_params:,} parameters; saved as **{spec.name}**."
    )


# ---------------------------------------------------------------------------------------------
# Page
# ---------------------------------------------------------------------------------------------


def main() -> None:
    """Settings → start → live progress → checkpoint."""
    state = st.session_state
    for name, value in DEFAULTS.items():
        state.setdefault(name, value)
    limits = loading.limits()
    root = loading.user_root()
    st.title("Train")
    st.markdown(
        "Train a small Transformer with the paper's recipe (Adam, the Noam schedule, label smoothing). "
        "Training runs in the background: switch pages, come back, stop it whenever you like."
    )
    job = jobs.REGISTRY.get(session.session_id())
    busy = job is not None and job.active
    left, right = st.columns(2)
    with left:
        source, default_name = source_settings(limits)
    with right:
        size = size_settings(limits)
    st.markdown("##### Schedule")
    config = schedule_settings(limits, size.d_model)
    state.setdefault("train_name", "")
    c1, c2 = st.columns([2, 1])
    raw_name = c1.text_input("Checkpoint name", key="train_name", placeholder=f"{default_name}-{state['train_size']}",
                             persist_state=session.PERSIST)  # fmt: skip
    problem = None
    try:
        name = checkpoint_name(raw_name or f"{default_name}-{state['train_size']}")
        if source is not None:
            n_params = jobs.check_spec(recipes.RunSpec(name, source, size, config), limits, source.vocab_size)
            c2.metric("Parameters", f"≈ {n_params:,}")
    except ValueError as exc:
        problem = str(exc)
        st.error(problem)
    ready = source is not None and problem is None and not busy
    if c2.button(
        "Start training", key="train_start", type="primary", icon=":material/play_arrow:", disabled=not ready
    ):
        start(recipes.RunSpec(name, source, size, config), limits, root)
        st.rerun()
    if isinstance(source, recipes.TaskSource):
        fast_recipe(c2, source, raw_name, config.seed, limits, root, ready)
    if state.get("_train_error"):
        st.error(state.pop("_train_error"))
    st.divider()
    job = jobs.REGISTRY.get(session.session_id())
    polling = job is not None and job.active
    st.fragment(progress_view, run_every=POLL_SECONDS if polling else None)()


main()
