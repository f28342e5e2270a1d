"""Draw the concept pages' diagrams as SVG files in docs/assets/ (no renderer, no network).

Each diagram is boxes at grid positions and arrows between them; run
`.venv/bin/python scripts/diagrams.py` after changing one and commit the SVGs.
"""

from __future__ import annotations

from dataclasses import dataclass
from html import escape
from pathlib import Path

ASSETS = Path(__file__).parents[1] / "docs" / "assets"
BOX_W, BOX_H, GAP_X, GAP_Y, MARGIN = 170, 56, 60, 44, 16


@dataclass(frozen=True)
class Box:
    name: str
    column: float
    row: float
    label: str  # lines split on "|"
    tone: str = "#e8eaf6"


@dataclass(frozen=True)
class Arrow:
    start: str
    end: str
    label: str = ""


def _centre(box: Box) -> tuple[float, float]:
    x = MARGIN + box.column * (BOX_W + GAP_X) + BOX_W / 2
    y = MARGIN + box.row * (BOX_H + GAP_Y) + BOX_H / 2
    return x, y


def _edge_point(box: Box, towards: tuple[float, float]) -> tuple[float, float]:
    """Where the line from the box's centre towards a point leaves the box."""
    cx, cy = _centre(box)
    dx, dy = towards[0] - cx, towards[1] - cy
    if dx == 0 and dy == 0:
        return cx, cy
    scale = min(
        (BOX_W / 2) / abs(dx) if dx else float("inf"),
        (BOX_H / 2) / abs(dy) if dy else float("inf"),
    )
    return cx + dx * scale, cy + dy * scale


def svg(title: str, boxes: list[Box], arrows: list[Arrow]) -> str:
    by_name = {box.name: box for box in boxes}
    width = MARGIN * 2 + (max(b.column for b in boxes) + 1) * (BOX_W + GAP_X) - GAP_X
    height = MARGIN * 2 + (max(b.row for b in boxes) + 1) * (BOX_H + GAP_Y) - GAP_Y
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width:.0f} {height:.0f}" '
        f'role="img" aria-label="{escape(title)}" font-family="sans-serif" font-size="13">',
        f"<title>{escape(title)}</title>",
        '<defs><marker id="head" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" '
        'markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" '
        'fill="#37474f"/></marker></defs>',
    ]
    for arrow in arrows:
        start, end = by_name[arrow.start], by_name[arrow.end]
        x1, y1 = _edge_point(start, _centre(end))
        x2, y2 = _edge_point(end, _centre(start))
        parts.append(
            f'<line x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2:.1f}" y2="{y2:.1f}" stroke="#37474f" '
            'stroke-width="1.5" marker-end="url(#head)"/>'
        )
        if arrow.label:
            mx, my = (x1 + x2) / 2, (y1 + y2) / 2 - 6
            parts.append(
                f'<text x="{mx:.1f}" y="{my:.1f}" text-anchor="middle" fill="#37474f" '
                f'font-size="11">{escape(arrow.label)}</text>'
            )
    for box in boxes:
        cx, cy = _centre(box)
        parts.append(
            f'<rect x="{cx - BOX_W / 2:.1f}" y="{cy - BOX_H / 2:.1f}" width="{BOX_W}" '
            f'height="{BOX_H}" rx="8" fill="{box.tone}" stroke="#3949ab"/>'
        )
        lines = box.label.split("|")
        first = cy - (len(lines) - 1) * 8 + 4
        for index, line in enumerate(lines):
            weight = ' font-weight="bold"' if index == 0 else ""
            parts.append(
                f'<text x="{cx:.1f}" y="{first + index * 16:.1f}" text-anchor="middle"'
                f"{weight}>{escape(line)}</text>"
            )
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


WRITE, HOLD, STOP = "#e8f5e9", "#fff8e1", "#ffebee"

DIAGRAMS: dict[str, tuple[str, list[Box], list[Arrow]]] = {
    "episodes": (
        "An episode's states: stored pending, claimed, done or failed, re-driven",
        [
            Box("in", 0, 0, "intake|ingest · POST /v1/episodes"),
            Box("pending", 1, 0, "pending|committed before queueing"),
            Box("processing", 2, 0, "processing|claimed under a lease"),
            Box("done", 3, 0, "done|decisions logged", WRITE),
            Box("failed", 3, 1, "failed|reason on the row", STOP),
            Box("sweep", 1, 1, "sweeper|lost wake-ups, expired leases", HOLD),
        ],
        [
            Arrow("in", "pending"),
            Arrow("pending", "processing", "worker or inline"),
            Arrow("processing", "done"),
            Arrow("processing", "failed", "budget spent"),
            Arrow("sweep", "pending", "re-queue"),
            Arrow("failed", "sweep", "retry / re-drive"),
        ],
    ),
    "candidates": (
        "From an episode to candidates: the extractor, the guards, then the policy",
        [
            Box("episode", 0, 0, "episode|text, source, occurred_at"),
            Box("rules", 1, 0, "rules|statement forms"),
            Box("model", 1, 1, "model|OpenAI-compatible"),
            Box("guards", 2, 0, "guards|evidence in the text?"),
            Box("candidate", 3, 0, "candidate|attribute, value,|confidence, evidence", HOLD),
            Box("policy", 3, 1, "policy|write · buffer ·|quarantine · refuse"),
        ],
        [
            Arrow("episode", "rules"),
            Arrow("episode", "model", "if configured"),
            Arrow("rules", "guards"),
            Arrow("model", "guards"),
            Arrow("guards", "candidate"),
            Arrow("candidate", "policy"),
        ],
    ),
    "facts": (
        "A fact supersedes the one before it; both stay in the ledger",
        [
            Box("first", 0, 0, "home_city = Utrecht|valid 01-10 → 03-01"),
            Box("second", 1, 0, "home_city = Lisbon|valid 03-01 → open", WRITE),
            Box("episode1", 0, 1, "episode e1|source, trust, evidence"),
            Box("episode2", 1, 1, "episode e2|source, trust, evidence"),
            Box("read", 2, 0, "get: Lisbon|get --at 02-01: Utrecht"),
        ],
        [
            Arrow("second", "first", "supersedes"),
            Arrow("episode1", "first", "source"),
            Arrow("episode2", "second", "source"),
            Arrow("second", "read"),
        ],
    ),
    "bitemporal": (
        "Two times per fact, three questions",
        [
            Box("fact", 0, 0.5, "a fact version|valid_from · valid_to|recorded · superseded"),
            Box("now", 1, 0, "now|valid now, current belief", WRITE),
            Box("asof", 1, 1, "as of X|valid at X (--at)"),
            Box("believed", 2, 0.5, "as believed on Y|recorded by Y (--known-at)", HOLD),
        ],
        [
            Arrow("fact", "now"),
            Arrow("fact", "asof", "valid time"),
            Arrow("asof", "believed", "recorded time"),
            Arrow("now", "believed"),
        ],
    ),
    "trust": (
        "Trust comes from the episode's source; untrusted facts wait in quarantine",
        [
            Box("hot", 0, 0, "remember|user_confirmed"),
            Box("message", 0, 1, "message|inferred"),
            Box("event", 0, 2, "business_event|verified"),
            Box("tool", 0, 3, "tool_result|untrusted"),
            Box("ledger", 2, 0.5, "ledger|active facts", WRITE),
            Box("buffer", 1, 2, "recurrence buffer|weak or repeated", HOLD),
            Box("quarantine", 1, 3, "quarantine|hidden from reads", STOP),
            Box("reviewer", 2, 3, "reviewer|promote · dismiss"),
        ],
        [
            Arrow("hot", "ledger", "write"),
            Arrow("message", "ledger", "immediate"),
            Arrow("message", "buffer", "rule"),
            Arrow("event", "ledger", "write"),
            Arrow("tool", "quarantine"),
            Arrow("quarantine", "reviewer"),
            Arrow("reviewer", "ledger", "promote"),
            Arrow("buffer", "ledger", "promoted"),
        ],
    ),
    "buffer": (
        "The recurrence buffer: a candidate waits until sessions repeat it or the user confirms",
        [
            Box("candidate", 0, 0, "candidate|from a session"),
            Box("buffered", 1, 0, "buffered|supporting episodes", HOLD),
            Box("promoted", 2, 0, "promoted|fact from first support", WRITE),
            Box("confirmed", 2, 1, "confirmed|user said it / sgam confirm", WRITE),
            Box("rejected", 1, 1, "rejected · reset|· expired", STOP),
        ],
        [
            Arrow("candidate", "buffered"),
            Arrow("buffered", "promoted", "N sessions in D"),
            Arrow("buffered", "confirmed"),
            Arrow("buffered", "rejected"),
        ],
    ),
    "decision-log": (
        "Every decision is appended to the log; replay rebuilds the ledger from it",
        [
            Box("decide", 0, 0, "a decision|write · quarantine · forget …"),
            Box("log", 1, 0, "decision log|append-only, hashed", HOLD),
            Box("ledger", 1, 1, "ledger and buffer|the state", WRITE),
            Box("replay", 2, 0, "sgam replay --to URL|no catalogue, no model"),
            Box("copy", 2, 1, "an empty store|the same ledger", WRITE),
        ],
        [
            Arrow("decide", "log"),
            Arrow("decide", "ledger"),
            Arrow("log", "replay"),
            Arrow("replay", "copy"),
        ],
    ),
    "forget": (
        "Forget hides a subject from every read; purge erases its values too",
        [
            Box("subject", 0, 0, "a subject's facts|episodes, candidates"),
            Box("forget", 1, 0, "forget|one logged event", HOLD),
            Box("hidden", 2, 0, "every read|returns nothing", STOP),
            Box("purge", 1, 1, "forget --purge|values, evidence erased", STOP),
            Box("kept", 2, 1, "kept for audit|ids, times, attributes"),
            Box("vacuum", 0, 1, "sgam purge-vacuum|old row versions (PostgreSQL)"),
        ],
        [
            Arrow("subject", "forget"),
            Arrow("forget", "hidden"),
            Arrow("subject", "purge"),
            Arrow("purge", "kept"),
            Arrow("purge", "vacuum", "then"),
        ],
    ),
}


def main() -> None:
    ASSETS.mkdir(parents=True, exist_ok=True)
    for name, (title, boxes, arrows) in DIAGRAMS.items():
        (ASSETS / f"{name}.svg").write_text(svg(title, boxes, arrows), encoding="utf-8")


if __name__ == "__main__":
    main()
