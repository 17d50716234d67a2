"""Train page: pick data and a model size, train in the background, watch the curves, keep the checkpoint."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pandas as pd
import streamlit as st

from pages import _loading as loading
from pages import _state as session
from pages import _views as schema
from pages import _widgets as widgets
from visformer import i18n, recipes
from visformer.architectures import DEFAULT, Family, architecture
from visformer.classroom import catalogue, jobs
from visformer.classroom.hosting import BusyError, HostedLimits
from visformer.classroom.inputs import checkpoint_name, parse_uploaded_parallel, parse_uploaded_tsv
from visformer.config import TrainConfig
from visformer.corpora import DATA_ENV, data_roots
from visformer.data import Pair
from visformer.explain import training as tfig
from visformer.tasks import TASKS

session.ensure_frame()

SOURCES = ["task", "upload", "disk"]  # ids; shown as train.source.ID
UPLOAD_KINDS = ["two", "tsv"]  # ids; shown as train.upload.ID
ARCHITECTURES = list(schema.TRAIN_PARAMS["train_arch"].options)  # the registry's trainable_in_app entries
SIZES = [*recipes.PRESETS, "custom"]
BATCH_TOKENS = [256, 512, 1024, 2048, 4096, 8192]
STEP_OPTIONS = [10, 20, 50, 100, 200, 300, 400, 600, 800, 1000, 1500, 2000, 3000, 5000, 10_000, 20_000]
WARMUP_OPTIONS = [1, 10, 20, 50, 100, 200, 300, 500, 1000, 2000, 4000]
POLL_SECONDS = 1.0
STATE_KEYS = {
    jobs.PREPARING: "train.state.preparing",
    jobs.RUNNING: "train.state.running",
    jobs.STOPPING: "train.state.stopping",
    jobs.SAVING: "train.state.saving",
}
DEFAULTS = {
    "train_source": SOURCES[0],
    "train_task": "copy",
    "train_arch": DEFAULT,
    "train_upload_kind": UPLOAD_KINDS[0],
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


def shown(key_of: Callable[[str], str]) -> Callable[[str], str]:
    """A format_func that shows an option in this run's language (fixed now: AppTest calls it after the run)."""
    lang = session.lang()
    return lambda option: i18n.t(key_of(option), lang)


@st.cache_data(max_entries=4, show_spinner=False)
def corpora() -> list[jobs.DiskCorpus]:
    """Corpora found under the data roots."""
    return [c for root in data_roots() for c in jobs.find_corpora(root)]


@st.cache_data(max_entries=8, show_spinner=False)
def disk_pairs(corpus: jobs.DiskCorpus, _limits: HostedLimits, max_lines: int) -> list[Pair]:
    """Pairs of a corpus on disk (keyed on the corpus and the line limit)."""
    return jobs.read_corpus(corpus, _limits)


@st.cache_data(max_entries=8, show_spinner=False)
def upload_pairs(files: tuple[tuple[str, bytes], ...], _limits: HostedLimits, max_bytes: int) -> list[Pair]:
    """Pairs of uploaded files: one TSV or two aligned files (clear errors on bad files)."""
    if len(files) == 1:
        ((name, data),) = files
        return parse_uploaded_tsv(data, _limits, name)
    (src_name, src), (tgt_name, tgt) = files
    return parse_uploaded_parallel(src, tgt, _limits, src_name, tgt_name)


def preview(pairs: list[Pair], n: int = 3) -> None:
    """How many pairs and the first few."""
    st.success(session.tr("train.pairs", n=f"{len(pairs):,}"))
    rows = [{session.tr("train.col.source"): p.src, session.tr("train.col.target"): p.tgt} for p in pairs[:n]]
    st.dataframe(pd.DataFrame(rows), hide_index=True)


# ---------------------------------------------------------------------------------------------
# Settings
# ---------------------------------------------------------------------------------------------


def source_settings(limits: HostedLimits) -> tuple[recipes.DataSource | None, str]:
    """What to learn: (data source or None when not ready, a short name for the checkpoint)."""
    kind = st.radio(session.tr("train.source"), SOURCES, key="train_source", persist_state=session.PERSIST,
                    horizontal=True, format_func=shown(lambda s: f"train.source.{s}"))  # fmt: skip
    if kind == SOURCES[0]:
        task = st.selectbox(
            session.tr("train.task"), list(TASKS), key="train_task", persist_state=session.PERSIST
        )
        st.caption(session.tr(f"train.task.{task}"))
        return recipes.TaskSource(task), task
    vocab_high = min(8000, limits.max_vocab_size)
    st.session_state["train_vocab"] = schema.clamp(st.session_state["train_vocab"], 300, vocab_high)
    if kind == SOURCES[1]:
        with st.spinner(session.tr("train.reading_upload")):
            pairs, name = upload_settings(limits)
    else:
        with st.spinner(session.tr("train.reading_corpus")):
            pairs, name = disk_settings(limits)
    st.slider(session.tr("train.vocab"), 300, vocab_high, step=100, key="train_vocab",
              persist_state=session.PERSIST)  # fmt: skip
    if pairs is None:
        return None, name
    return recipes.PairsSource(name, tuple(pairs), vocab_size=st.session_state["train_vocab"]), name


def upload_settings(limits: HostedLimits) -> tuple[list[Pair] | None, str]:
    """Uploaded pairs (None until valid files are given) and their name."""
    form = st.radio(session.tr("train.format"), UPLOAD_KINDS, key="train_upload_kind", horizontal=True,
                    persist_state=session.PERSIST, format_func=shown(lambda k: f"train.upload.{k}"))  # fmt: skip
    mb = widgets.upload_mb(limits.max_upload_bytes)
    if form == UPLOAD_KINDS[1]:
        st.caption(session.tr("train.upload.tsv_help", mb=mb))
        upload = st.file_uploader(session.tr("train.upload.tsv_file"), key="train_tsv", max_upload_size=mb)
        files = (upload,) if upload is not None else ()
        wanted = 1
    else:
        st.caption(session.tr("train.upload.two_help", mb=mb))
        left, right = st.columns(2)
        src = left.file_uploader(session.tr("train.upload.src"), key="train_src_file", max_upload_size=mb)
        tgt = right.file_uploader(session.tr("train.upload.tgt"), key="train_tgt_file", max_upload_size=mb)
        files = tuple(f for f in (src, tgt) if f is not None)
        wanted = 2
    if len(files) < wanted:
        st.info(session.tr("train.upload.wait"))
        return None, "corpus"
    try:
        pairs = upload_pairs(tuple((f.name, f.getvalue()) for f in files), limits, limits.max_upload_bytes)
    except ValueError as exc:
        st.error(session.error(exc, capital=False))  # names the file first ("train.en: …")
        return None, "corpus"
    preview(pairs)
    return pairs, Path(files[0].name).stem


def disk_settings(limits: HostedLimits) -> tuple[list[Pair] | None, str]:
    """Pairs of a corpus found on disk (None when there is none) and its name."""
    found = corpora()
    if not found:
        st.info(session.tr("train.no_corpus", roots=", ".join(str(r) for r in data_roots()), env=DATA_ENV))
        return None, "corpus"
    names = [c.name for c in found]
    if st.session_state.get("train_corpus") not in names:
        st.session_state["train_corpus"] = names[0]
    name = st.selectbox(session.tr("train.corpus"), names, key="train_corpus", persist_state=session.PERSIST)
    try:
        pairs = disk_pairs(found[names.index(name)], limits, limits.max_upload_lines)
    except ValueError as exc:
        st.error(session.error(exc, capital=False))  # names the file first ("train.en: …")
        return None, "corpus"
    preview(pairs)
    return pairs, name.split("/")[0]


def architecture_settings(source: recipes.DataSource | None) -> str:
    """The Transformer, or for a built-in task a GRU seq2seq without attention or with Bahdanau / Luong attention."""
    if not isinstance(source, recipes.TaskSource):
        return DEFAULT
    state = st.session_state
    if state.get("train_arch") not in ARCHITECTURES:
        state["train_arch"] = DEFAULT
    arch = st.radio(session.tr("train.arch"), ARCHITECTURES, key="train_arch", persist_state=session.PERSIST,
                    horizontal=True, format_func=shown(lambda a: f"train.arch.{a}"),
                    help=session.tr("train.arch.help"))  # fmt: skip
    st.caption(session.tr(f"train.arch.{arch}.about"))
    return arch


def size_text(size: recipes.ModelSize, arch: str) -> str:
    """'d_model 64, 4 heads, 1+1 layers, d_ff 128' (a GRU model: d_model and layers only)."""
    if architecture(arch).multi_head:
        return session.tr("train.size.transformer", d=size.d_model, h=size.n_heads, enc=size.n_layers,
                          dec=size.decoder_layers, ff=size.d_ff)  # fmt: skip
    return session.tr("train.size.rnn", d=size.d_model, enc=size.n_layers, dec=size.decoder_layers)


def size_settings(limits: HostedLimits, arch: str) -> recipes.ModelSize:
    """A preset or custom model size (custom sizes are bounded by the limits)."""
    state = st.session_state
    preset = st.radio(session.tr("train.size"), SIZES, key="train_size", persist_state=session.PERSIST,
                      horizontal=True, format_func=shown(lambda s: f"train.size.{s}"))  # fmt: skip
    if preset != "custom":
        size = recipes.PRESETS[preset]
        st.caption(size_text(size, arch))
        return size
    c1, c2 = st.columns(2)
    multi_head = architecture(arch).multi_head
    if multi_head:
        heads = [h for h in (1, 2, 4, 8, 16) if h <= limits.max_heads]
        if state["train_heads"] not in heads:
            state["train_heads"] = heads[-1]
        h = c1.select_slider(
            session.tr("train.heads"), heads, key="train_heads", persist_state=session.PERSIST
        )
    else:
        h = 8  # a GRU has no heads: d_model in steps of 16, each encoder direction gets d_model / 2
    d_high = max(h * 2, min(512, limits.max_d_model) // (2 * h) * 2 * h)
    state["train_d_model"] = schema.clamp(state["train_d_model"] // (2 * h) * (2 * h), 2 * h, d_high)
    d_model = c2.slider("d_model", 2 * h, d_high, step=2 * h, key="train_d_model", persist_state=session.PERSIST,
                        help=session.tr("train.d_model_help" if multi_head else "train.d_model_help_rnn"))  # fmt: skip
    state["train_layers"] = schema.clamp(state["train_layers"], 1, min(6, limits.max_layers))
    layers = c1.slider(session.tr("train.layers"), 1, min(6, limits.max_layers), key="train_layers",
                       persist_state=session.PERSIST)  # fmt: skip
    ff_high = min(2048, limits.max_d_ff)
    state["train_d_ff"] = schema.clamp(state["train_d_ff"] // 16 * 16, 16, ff_high)
    if not multi_head:
        return recipes.ModelSize(d_model, 1, layers, state["train_d_ff"])  # heads and d_ff unused by a GRU
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
            session.tr("train.steps"), step_options, key="train_steps", persist_state=session.PERSIST
        )
        warmup = st.select_slider(session.tr("train.warmup"), WARMUP_OPTIONS, key="train_warmup",
                                  persist_state=session.PERSIST, help=session.tr("train.warmup_help"))  # fmt: skip
        factor = st.slider(
            session.tr("train.lr_factor"),
            0.1,
            5.0,
            step=0.1,
            key="train_factor",
            persist_state=session.PERSIST,
        )
        c1, c2 = st.columns(2)
        batch = c1.select_slider(
            session.tr("train.batch"), BATCH_TOKENS, key="train_batch", persist_state=session.PERSIST
        )
        seed = c2.number_input(
            session.tr("train.seed"), 0, 2**31 - 1, key="train_seed", persist_state=session.PERSIST
        )
    with right:
        widgets.chart(
            tfig.noam_figure(d_model, warmup, factor, steps, lang=session.lang()), "noam-schedule", key="noam"
        )
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
        st.session_state["_train_error"] = session.error(exc)


def open_checkpoint(key: str) -> None:
    """Pick the trained checkpoint (a callback: runs before the sidebar widget is drawn), with its own example.

    The sentence of another model (an English one on a sort-task model: all <unk>) makes no sense to it, so
    the page it opens on starts from the new model's first example (loading.offer_examples).
    """
    session.switch_checkpoint(key)
    st.session_state["sentence"] = ""


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
    spec = job.spec
    st.subheader(session.tr("train.run", name=spec.name))
    st.caption(run_text(spec, p.n_parameters))
    if p.active:
        st.progress(p.fraction, text=session.tr("train.progress", state=session.tr(STATE_KEYS[p.state]),
                                                step=f"{p.step:,}", total=f"{p.total_steps:,}"))  # fmt: skip
        st.button(session.tr("train.stop"), key="train_stop", icon=":material/stop_circle:", on_click=job.stop,
                  help=session.tr("train.stop_help"))  # fmt: skip
    if p.history:
        last = p.history[-1]
        m = st.columns(5)
        m[0].metric(session.tr("train.metric.step", total=f"{p.total_steps:,}"), f"{p.step:,}")
        m[1].metric(
            session.tr("train.metric.loss"), f"{last.loss:.3f}", help=session.tr("train.metric.loss_help")
        )
        m[2].metric(session.tr("train.metric.lr"), f"{last.lr:.2e}")
        m[3].metric(session.tr("train.metric.speed"), f"{last.tokens_per_s:,.0f}")
        m[4].metric(session.tr("train.metric.time"), f"{p.elapsed_s:,.0f} s")
        evals = p.evals
        widgets.chart(
            tfig.curves_figure(
                [h.step for h in p.history], [h.loss for h in p.history], [h.lr for h in p.history],
                valid_steps=[e.step for e in evals], valid_losses=[e.valid_loss for e in evals],
                total_steps=p.total_steps, label_smoothing=spec.train.label_smoothing, dropout=spec.dropout,
                lang=session.lang(),
            ),
            "training-curves", key="train-curves",
        )  # fmt: skip
        st.caption(
            session.tr("train.curves_caption", eps=f"{spec.train.label_smoothing:g}", p=f"{spec.dropout:g}")
        )
        if evals:
            examples_view(evals[-1], spec.train.stop_at_exact_match)
    if not p.active:
        finished_view(p, spec)


def run_text(spec: recipes.RunSpec, n_parameters: int) -> str:
    """What this run trains: architecture, size and parameters (counted on the model once it is built)."""
    params = session.tr("train.run_params", n=f"{n_parameters:,}") if n_parameters else ""
    return session.tr("train.run_about", arch=session.tr(f"train.arch.{spec.architecture}"),
                      size=size_text(spec.size, spec.architecture), params=params)  # fmt: skip


def examples_view(ev, target: float | None) -> None:
    """The model's current outputs on a few validation sentences, with the scores the stop rule reads."""
    scores = []
    if ev.exact_match is not None:
        scores.append(session.tr("train.exact_match", value=tfig.share_text(ev.exact_match)))
        if target is not None:
            scores.append(session.tr("train.stop_rule", target=tfig.share_text(target)))
    if ev.alignment_score is not None:
        scores.append(session.tr("train.alignment", value=tfig.share_text(ev.alignment_score)))
    if ev.bleu is not None:
        scores.append(f"BLEU {ev.bleu:.1f}")
    valid = session.tr("train.valid_loss", value=f"{ev.valid_loss:.3f}")
    st.markdown(session.tr("train.outputs_at", step=f"{ev.step:,}", scores=", ".join([valid, *scores])))
    cols = [session.tr("train.col.source"), session.tr("train.col.reference"), session.tr("train.col.output")]
    rows = [dict(zip(cols, (s, r, o or session.tr("train.empty")), strict=True)) for s, r, o in ev.samples]
    st.dataframe(pd.DataFrame(rows, columns=cols), hide_index=True, width="stretch")


def finished_view(p: jobs.Progress, spec: recipes.RunSpec) -> None:
    """The outcome: why the run ended, where the checkpoint is and buttons to open it."""
    if p.state == jobs.FAILED and p.checkpoint is None:
        st.error(session.tr("train.failed", message=session.literal(p.message)))
        return
    if p.checkpoint is None:
        st.info(session.tr("train.nothing_saved"))
        return
    key = catalogue.USER_PREFIX + p.checkpoint.name
    saved = session.tr("train.saved", name=p.checkpoint.name, step=f"{p.step:,}")
    if p.state == jobs.FAILED:
        message = session.literal(session.capitalised(p.message))
        st.warning(session.tr("train.failed_saved", message=message, saved=saved))
    elif p.reason:
        target = spec.train.stop_at_exact_match
        why = session.tr(f"train.reason.{p.reason}", step=f"{p.step:,}",
                         target=tfig.share_text(target) if target is not None else "")  # fmt: skip
        st.success(f"{why} {saved}")
    else:
        st.success(saved)
    c1, c2 = st.columns(2)
    page = architecture(spec.architecture).pages[0]  # the page this architecture opens on
    label = f"train.open_{page}"
    if c1.button(session.tr(label), key="train_open", on_click=open_checkpoint, args=(key,),
                 icon=":material/grid_view:", type="primary"):  # fmt: skip
        st.switch_page(f"pages/{page}.py")
    if c2.button(session.tr("train.open_timeline"), key="train_open_timeline", on_click=open_checkpoint, args=(key,),
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
        where.caption(session.tr("train.fast.unavailable", problem=session.error(exc, capital=False)))
        return
    target = spec.train.stop_at_exact_match
    stop_rule = session.tr("train.fast.stop_rule", target=tfig.share_text(target)) if target else ""
    if where.button(
        session.tr("train.fast"), key="train_fast", icon=":material/bolt:", disabled=not ready,
        help=session.tr("train.fast.help", warmup=spec.train.warmup, factor=f"{spec.train.lr_factor:g}",
                        stop_rule=stop_rule),
    ):  # fmt: skip
        start(spec, limits, root)
        st.rerun()
    where.caption(session.tr("train.fast.caption", size=size_text(spec.size, spec.architecture),
                             n=f"{n_params:,}", name=spec.name))  # fmt: skip


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
    st.title(session.tr("train.title"))
    st.markdown(session.tr("train.intro"))
    job = jobs.REGISTRY.get(session.session_id())
    busy = job is not None and job.active
    left, right = st.columns(2)
    with left:
        source, default_name = source_settings(limits)
    with right:
        arch = architecture_settings(source)
        size = size_settings(limits, arch)
    st.markdown("##### " + session.tr("train.schedule"))
    config = schedule_settings(limits, size.d_model)
    state.setdefault("train_name", "")
    c1, c2 = st.columns([2, 1])
    short = "" if arch == DEFAULT else f"-{arch}"
    default = f"{default_name}{short}-{state['train_size']}"
    raw_name = c1.text_input(session.tr("train.name"), key="train_name", placeholder=default,
                             persist_state=session.PERSIST)  # fmt: skip
    problem = None
    try:
        name = checkpoint_name(raw_name or default)
        if source is not None:
            spec = recipes.RunSpec(name, source, size, config, architecture=arch)
            n_params = jobs.check_spec(spec, limits, source.vocab_size)
            c2.metric(session.tr("train.params"), f"≈ {n_params:,}", help=session.tr("train.params_help"))
    except ValueError as exc:
        problem = session.error(exc)
        st.error(problem)
    ready = source is not None and problem is None and not busy
    if c2.button(session.tr("train.start"), key="train_start", type="primary", icon=":material/play_arrow:",
                 disabled=not ready):  # fmt: skip
        start(recipes.RunSpec(name, source, size, config, architecture=arch), limits, root)
        st.rerun()
    if isinstance(source, recipes.TaskSource) and architecture(arch).family is Family.TRANSFORMER:
        fast_recipe(c2, source, raw_name, config.seed, limits, root, ready)
    if state.get("_train_error"):
        st.error(state.pop("_train_error"))
    st.divider()
    job = jobs.REGISTRY.get(session.session_id())
    polling = job is not None and job.active
    session.sync_url(list(schema.TRAIN_PARAMS))
    st.fragment(progress_view, run_every=POLL_SECONDS if polling else None)()


main()
