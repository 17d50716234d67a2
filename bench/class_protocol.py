"""Streamlit's websocket protocol as a student's browser speaks it: one session, its runs, widget states.

Used by bench/bench_class.py (simulated students) and the crash and deploy tests.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field

DONE_STATES = (0, 1, 3)  # ForwardMsg.ScriptFinishedStatus: success, compile error, fragment run success
ERROR_ALERT = 1  # Alert.Format.ERROR
RUN_TIMEOUT_S = 300.0  # a bound on one script run: a hung run becomes an error, never a hung bench


# ---------------------------------------------------------------------------------------------
# The protocol: one websocket session
# ---------------------------------------------------------------------------------------------


@dataclass
class Run:
    """What one script run sent back: timing, texts, widgets, errors."""

    seconds: float
    texts: list[str] = field(default_factory=list)  # markdown, headings, captions, alert bodies
    alerts: list[tuple[int, str]] = field(default_factory=list)  # (Alert.Format, body)
    exceptions: list[str] = field(default_factory=list)
    widgets: dict[str, str] = field(default_factory=dict)  # label -> widget id (a tab label -> its tabs' id)
    options: dict[str, list[str]] = field(default_factory=dict)  # selectbox / pills label -> options

    def text(self) -> str:
        """Every text of the run, one per line."""
        return "\n".join(self.texts)

    def errors(self) -> list[str]:
        """Exceptions and error boxes, one line each."""
        boxes = [body for fmt, body in self.alerts if fmt == ERROR_ALERT]
        return [f"exception: {e[:200]}" for e in self.exceptions] + [f"error box: {b[:200]}" for b in boxes]

    def yours(self) -> list[str]:
        """The trained models the sidebar's checkpoint picker lists for this session."""
        return [o for o in self.options.get("Checkpoint", []) if o.endswith("(yours)")]


def text_state(widget_id: str, value: str):
    """A text input's state."""
    from streamlit.proto.WidgetStates_pb2 import WidgetState

    return WidgetState(id=widget_id, string_value=value)


def slider_state(widget_id: str, value: float):
    """A single-value slider's state."""
    from streamlit.proto.WidgetStates_pb2 import WidgetState

    state = WidgetState(id=widget_id)
    state.double_array_value.data.append(float(value))
    return state


def select_slider_state(widget_id: str, option: str):
    """A single-value select slider's state (the option as shown: Streamlit sends the formatted text)."""
    from streamlit.proto.WidgetStates_pb2 import WidgetState

    state = WidgetState(id=widget_id)
    state.string_array_value.data.append(option)
    return state


def pick_state(session: Session, label: str, index: int):
    """The state that moves the slider or select slider `label` of the last run to position `index`."""
    options = session.options.get(label)
    if options:
        return select_slider_state(session.widgets[label], options[min(index, len(options) - 1)])
    return slider_state(session.widgets[label], index)


def click_state(widget_id: str):
    """A button click (a trigger: sent once)."""
    from streamlit.proto.WidgetStates_pb2 import WidgetState

    return WidgetState(id=widget_id, trigger_value=True)


def _read_delta(msg, run: Run, tabs: list[str]) -> None:
    """Add one delta's texts, widgets, options and errors to `run` (tabs: the latest tabs container id)."""
    delta = msg.delta
    if delta.WhichOneof("type") == "add_block":
        block = delta.add_block
        kind = block.WhichOneof("type")
        if kind == "tab_container":
            tabs[:] = [block.id]
        elif kind == "tab" and tabs:
            run.widgets[block.tab.label] = tabs[0]
        return
    if delta.WhichOneof("type") != "new_element":
        return
    kind = delta.new_element.WhichOneof("type")
    element = getattr(delta.new_element, kind)
    if kind in ("markdown", "heading"):
        run.texts.append(element.body)
    elif kind == "alert":
        run.alerts.append((element.format, element.body))
        run.texts.append(element.body)
    elif kind == "exception":
        run.exceptions.append(f"{element.type}: {element.message}")
    if getattr(element, "id", "") and getattr(element, "label", ""):
        run.widgets[element.label] = element.id
    if kind == "selectbox" or (
        kind == "slider" and element.options
    ):  # a select slider: a slider with options
        run.options[element.label] = list(element.options)
    elif kind == "button_group":
        run.options[element.label] = [o.content for o in element.options]


class Session:
    """One browser tab's websocket session: sends reruns, reads the deltas they produce."""

    def __init__(self, ws_url: str, headers: dict[str, str] | None = None) -> None:
        self.ws_url, self.headers = ws_url, headers or {}
        self.pages: dict[str, str] = {}  # page title -> page_script_hash
        self.page = ""  # the current page's hash
        self.query = ""
        self.widgets: dict[str, str] = {}  # the last run's widgets
        self.options: dict[str, list[str]] = {}  # the last run's options (selectbox, pills, select slider)
        self.held: dict[str, object] = {}  # widget id -> the value state this tab keeps sending
        self.fragment: tuple[str, float] | None = None  # (fragment id, seconds) of an auto-rerunning fragment
        self._ws = None
        self._inbox: asyncio.Queue = asyncio.Queue()
        self._reader: asyncio.Task | None = None

    async def connect(self) -> None:
        """Open the websocket (subprotocol 'streamlit', as the browser does)."""
        import websockets

        self._ws = await websockets.connect(
            self.ws_url, subprotocols=["streamlit"], additional_headers=self.headers, max_size=None,
            open_timeout=RUN_TIMEOUT_S,
        )  # fmt: skip
        self._reader = asyncio.create_task(self._read())

    @property
    def response_headers(self) -> dict[str, str]:
        """Headers of the websocket upgrade response (e.g. the proxy's upstream)."""
        return dict(self._ws.response.headers) if self._ws is not None else {}

    async def _read(self) -> None:
        """Parse every ForwardMsg into the inbox (so the server's send queue never backs up)."""
        from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

        try:
            async for raw in self._ws:
                msg = ForwardMsg()
                msg.ParseFromString(raw)
                self._inbox.put_nowait(msg)
        except Exception as exc:  # noqa: BLE001 - a closed socket ends the session
            self._inbox.put_nowait(exc)

    async def close(self) -> None:
        """Close the websocket."""
        if self._ws is not None:
            await self._ws.close()
        if self._reader is not None:
            await asyncio.gather(self._reader, return_exceptions=True)

    async def rerun(self, *, page: str | None = None, query: str | None = None, states=(), auto=False) -> Run:
        """Ask for a script run (a page, a query string, changed widgets) and collect it until it ends."""
        from streamlit.proto.BackMsg_pb2 import BackMsg

        if page is not None:
            self.page, self.held = self.pages[page], {}
        if query is not None:
            self.query = query
        for state in states:
            if not state.HasField("trigger_value"):
                self.held[state.id] = state
        msg = BackMsg()
        client = msg.rerun_script
        client.query_string, client.page_script_hash = self.query, self.page
        sent = {wid: s for wid, s in self.held.items() if wid in self.widgets}
        sent.update({s.id: s for s in states})
        client.widget_states.widgets.extend(sent.values())
        if auto and self.fragment:
            client.fragment_id, client.is_auto_rerun = self.fragment[0], True
        start = time.perf_counter()
        await self._ws.send(msg.SerializeToString())
        run = await asyncio.wait_for(self._collect(start), RUN_TIMEOUT_S)
        if not auto:
            self.widgets, self.options = run.widgets, run.options
        return run

    async def _collect(self, start: float) -> Run:
        """Read messages until the script run is over."""
        run, tabs = Run(0.0), []
        while True:
            msg = await self._inbox.get()
            if isinstance(msg, Exception):
                raise ConnectionError(f"websocket closed: {msg}")
            kind = msg.WhichOneof("type")
            if kind == "delta":
                _read_delta(msg, run, tabs)
            elif kind == "navigation":
                self.pages.update({p.page_name: p.page_script_hash for p in msg.navigation.app_pages})
                self.page = msg.navigation.page_script_hash or self.page
            elif kind == "page_info_changed":
                self.query = msg.page_info_changed.query_string
            elif kind == "auto_rerun":
                self.fragment = (msg.auto_rerun.fragment_id, msg.auto_rerun.interval)
            elif kind == "stop_auto_rerun":
                self.fragment = None
            elif kind == "script_finished" and msg.script_finished in DONE_STATES:
                run.seconds = time.perf_counter() - start
                return run
