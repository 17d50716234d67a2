"""Run every benchmark, print a table and rewrite bench/RESULTS.md (`python -m bench [--quick]`).

Benchmarks owned by other helpers plug in as modules `bench/<name>.py` exposing
`run(quick: bool = False)` that returns a `bench.common.Section`, a list of them, or markdown text
starting with "## Title". Sections that were not measured in this run are kept from the old RESULTS.md.
"""

from __future__ import annotations

import argparse
import importlib
import re
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path

if __package__ in (None, ""):  # `python bench/run.py`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from bench import bench_scaling, bench_training  # noqa: E402
from bench.common import SHIPPED, TINY, Section, format_table, machine_info  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "RESULTS.md"
TITLE = "# visformer benchmarks"
# Order of sections in RESULTS.md; unknown titles go after these.
ORDER = [
    "Targets",
    "Training throughput",
    "Training profile",
    "Decoding",
    "Decoding: where a token's time goes",
    "Generation vs Hugging Face Marian",
    "Imported OPUS-MT (opus-mt-ko-en size)",
    "Time to learn",
    "App",
    "Scaling: sentence length",
    "Scaling: model size",
]

SectionLike = Section | str | list


def optional_module(*names: str):
    """The first of bench.<name> that imports (another helper's benchmark), or None."""
    for name in names:
        try:
            return importlib.import_module(f"bench.{name}")
        except ModuleNotFoundError as err:
            if err.name != f"bench.{name}":
                raise
    return None


def benchmarks(quick: bool) -> dict[str, Callable[[], SectionLike]]:
    """Name -> zero-argument function producing its section(s)."""
    config = TINY if quick else SHIPPED
    found: dict[str, Callable[[], SectionLike]] = {
        "training": lambda: bench_training.run(config, quick),
        "profile": lambda: bench_training.run_profile(config, quick),
        "scaling": lambda: bench_scaling.run(config, quick),
    }
    decoding = optional_module("bench_decoding")
    if decoding is not None:
        found["decoding"] = lambda: decoding.run(quick=quick)
    found["token"] = lambda: importlib.import_module("bench.bench_token").run(quick=quick)
    found["marian"] = lambda: importlib.import_module("bench.bench_marian").run(config, quick)
    found["opus"] = lambda: importlib.import_module("bench.bench_marian").run_opus(quick)
    found["learning"] = lambda: importlib.import_module("bench.bench_time_to_learn").run(quick=quick)
    found["app"] = lambda: importlib.import_module("bench.bench_app").run(quick=quick)
    return found


def as_markdown(result: SectionLike) -> list[str]:
    """Markdown of each section a benchmark returned."""
    items = result if isinstance(result, list) else [result]
    return [item if isinstance(item, str) else item.markdown() for item in items]


def split_sections(text: str) -> dict[str, str]:
    """Sections ('## Title' to the next '## ') of an existing RESULTS.md, by title."""
    parts = re.split(r"(?m)^(?=## )", text)
    return {p.splitlines()[0][3:].strip(): p.rstrip() + "\n" for p in parts if p.startswith("## ")}


def header(info: dict[str, str], quick: bool, seconds: float) -> str:
    """The top of RESULTS.md: how the figures were made and on what machine."""
    lines = [
        TITLE,
        "",
        "Written by `python -m bench`"
        + (" --quick (tiny sizes: a smoke run, not real figures)" if quick else "")
        + f" in {seconds:.0f} s. Every figure is a median over repetitions with its spread (min–max); "
        "peers are timed in alternating rounds so machine noise hits both alike.",
        "",
        "| machine | |",
        "|---|---|",
        *(f"| {k} | {v} |" for k, v in info.items()),
        "",
        "The machine may be shared with other jobs (see the load average above), so absolute times are noisy; "
        "ratios from alternating runs are the figures to trust. Sections keep the date of their own run.",
        "",
    ]
    return "\n".join(lines)


def write_results(
    path: Path, sections: dict[str, str], info: dict[str, str], quick: bool, seconds: float
) -> None:
    """Merge new sections into RESULTS.md (keeping sections not measured this time) and write it."""
    old = split_sections(path.read_text(encoding="utf-8")) if path.exists() else {}
    merged = {**old, **sections}
    titles = [t for t in ORDER if t in merged] + [t for t in merged if t not in ORDER]
    body = "\n".join(merged[t] for t in titles)
    path.write_text(header(info, quick, seconds) + "\n" + body, encoding="utf-8")


def print_section(markdown: str) -> None:
    """Print a section's table in plain text (or its markdown when it has none)."""
    lines = markdown.splitlines()
    table = [ln for ln in lines if ln.startswith("|") and not ln.startswith("|---")]
    print(f"\n== {lines[0][3:]} ==")
    if table:
        rows = [[c.strip() for c in ln.strip("|").split("|")] for ln in table]
        print(format_table(rows[0], rows[1:]))
    for ln in lines:
        if ln.startswith("- "):
            print(ln)


def main(argv: list[str] | None = None) -> int:
    """Run the selected benchmarks, print them and rewrite the results file."""
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes, few repetitions: a smoke run")
    parser.add_argument("--only", default="", help="comma-separated subset, e.g. training,scaling")
    parser.add_argument("--output", type=Path, default=RESULTS, help="results file to rewrite")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's choice)")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    available = benchmarks(args.quick)
    chosen = [n.strip() for n in args.only.split(",") if n.strip()] or list(available)
    unknown = [n for n in chosen if n not in available]
    if unknown:
        parser.error(f"unknown benchmark(s) {', '.join(unknown)}; choose from {', '.join(available)}")
    info = machine_info()
    print(" | ".join(f"{k}: {v}" for k, v in info.items()))
    start = time.perf_counter()
    sections: dict[str, str] = {}
    failed: list[str] = []
    for name in chosen:
        t0 = time.perf_counter()
        try:
            produced = as_markdown(available[name]())
        except Exception:  # noqa: BLE001 - one broken benchmark must not lose the others' figures
            traceback.print_exc()
            failed.append(name)
            produced = []  # its section from an earlier run, if any, stays in RESULTS.md
        for markdown in produced:
            print_section(markdown)
            sections[markdown.splitlines()[0][3:].strip()] = markdown
        print(f"({name}: {time.perf_counter() - t0:.0f} s)")
    write_results(args.output, sections, info, args.quick, time.perf_counter() - start)
    print(f"\nwrote {args.output}" + (f"; FAILED: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
