"""Why self-attention, measured: the paper's Table 1 beside one self-attention and one recurrent layer timed here."""

from __future__ import annotations

import time

import streamlit as st

from pages import _state as session
from pages import _widgets as widgets
from visformer.explain import complexity as cx
from visformer.utils import torch_threads

session.ensure_frame()
tr = session.tr

REPEATS, THREADS = 3, 1  # about a second on a busy 2-core machine


@st.cache_data(max_entries=1, show_spinner=False)
def measure(repeats: int, threads: int) -> tuple[cx.ComplexityBenchmark, float]:
    """Both layers over the n and d sweeps, timed once per server (until "Measure again"), and the seconds it took."""
    started = time.perf_counter()
    with torch_threads(threads):
        bench = cx.benchmark(repeats=repeats)
    return bench, time.perf_counter() - started


st.title(tr("models.cx.page_title"))
st.markdown(tr("models.cx.intro"))
if st.button(tr("models.cx.remeasure"), key="cx_remeasure"):
    measure.clear()
with st.spinner(tr("models.cx.measuring")):
    bench, seconds = measure(REPEATS, THREADS)
lang = session.lang()

left = right = st.container()  # one table above the other: side by side they needed sideways scrolling
with left:
    st.subheader(tr("models.cx.table_header"))
    st.table(
        {
            tr("models.cx.col_layer"): [tr(f"models.cx.t1.{i}") for i in range(len(cx.TABLE_1))],
            tr("models.cx.col_complexity"): [row[1] for row in cx.TABLE_1],
            tr("models.cx.col_sequential"): [row[2] for row in cx.TABLE_1],
            tr("models.cx.col_path"): [row[3] for row in cx.TABLE_1],
        },
        hide_index=True,
    )
    st.caption(tr("models.cx.table_caption"))
with right:
    st.subheader(tr("models.cx.measured_header", d=bench.d))
    rows = cx.measured_rows(bench)
    st.table(
        {
            tr("models.cx.col_n"): [r["n"] for r in rows],
            tr("models.cx.col_attention_ms"): [round(r["attention_ms"], 3) for r in rows],
            tr("models.cx.col_recurrent_ms"): [round(r["recurrent_ms"], 3) for r in rows],
            tr("models.cx.col_ratio"): [round(r["ratio"], 1) for r in rows],
            tr("models.cx.col_steps"): [f"{r['attention_steps']} / {r['recurrent_steps']}" for r in rows],
            tr("models.cx.col_paths"): [f"{r['attention_path']} / {r['recurrent_path']}" for r in rows],
        },
        hide_index=True,
    )
    st.caption(tr("models.cx.pairs") + " " + tr("models.cx.how", repeats=REPEATS, threads=THREADS, device="cpu",
                                                 seconds=seconds))  # fmt: skip

crossover = cx.measured_crossover(bench.by_n, "n")
if crossover is None:
    st.info(tr("models.cx.crossover_none", d=bench.d, n_max=max(c.n for c in bench.by_n)))
else:
    st.info(tr("models.cx.crossover_at", d=bench.d, n=crossover))

tab_n, tab_d, tab_steps = st.tabs([tr("models.cx.by_n"), tr("models.cx.by_d"), tr("models.cx.by_steps")])
with tab_n:
    widgets.chart(cx.complexity_figure(bench, "n", lang), "complexity-by-n")
with tab_d:
    widgets.chart(cx.complexity_figure(bench, "d", lang), "complexity-by-d")
with tab_steps:
    widgets.chart(cx.steps_figure(bench.by_n, lang), "complexity-steps")
    st.caption(tr("models.cx.steps_caption"))
session.sync_url([])  # the model and the language: a link opens this page as it is
