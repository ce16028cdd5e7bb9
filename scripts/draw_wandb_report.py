"""Draw the layout of a W&B report spec (wandb_report.json, as `grpo-ablate report --wandb`
writes it) as a PNG, block by block: text, headings, and each panel grid's panels with what
they plot. For reading a spec where no W&B server is at hand.

    python scripts/draw_wandb_report.py outputs/demo/wandb_report.json docs/wandb_report.png
"""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path


def _text(block: dict) -> str:
    parts = []
    for child in block.get("children", []):
        parts.append(child.get("text") or _text(child))
    return " ".join(p for p in parts if p)


def rows(spec: dict) -> list[tuple[str, list[str]]]:
    """(kind, lines) per block, in order; a panel grid lists one line per panel."""
    out = []
    for block in spec["spec"]["blocks"]:
        kind = block["type"]
        if kind == "paragraph" and not _text(block):
            continue
        if kind == "panel-grid":
            meta = block["metadata"]
            runset = meta["runSets"][0]
            group = ", ".join(g["name"] for g in runset.get("grouping", [])) or "-"
            panels = []
            for p in meta["panelBankSectionConfig"]["panels"]:
                cfg = p.get("config", {})
                what = cfg.get("metrics") or cfg.get("mediaKeys") or ["verdicts table"]
                how = (f" by {cfg['groupBy']}, {cfg.get('groupAgg')} ± {cfg.get('groupArea')}"
                       if cfg.get("groupBy") else "")
                panels.append(f"{p['viewType']}: {', '.join(what)}{how}")
            out.append((f"panel grid, run set '{runset['name']}' grouped by {group}", panels))
        else:
            out.append((kind, textwrap.wrap(_text(block), 110)[:3]))
    return out


def draw(spec_path: Path, png: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    spec = json.loads(spec_path.read_text())
    layout = rows(spec)
    height = 1.0 + sum(0.35 + 0.28 * len(lines) for _, lines in layout)
    fig, ax = plt.subplots(figsize=(11, height))
    ax.set_xlim(0, 1)
    ax.set_ylim(0, height)
    ax.axis("off")
    y = height - 0.5
    ax.text(0.01, y, spec["displayName"], fontsize=15, weight="bold", va="center")
    y -= 0.5
    for kind, lines in layout:
        box_h = 0.2 + 0.28 * len(lines)
        grid = kind.startswith("panel grid")
        ax.add_patch(plt.Rectangle((0.01, y - box_h), 0.98, box_h, fill=True, alpha=0.12,
                                   color="tab:blue" if grid else "grey"))
        ax.text(0.02, y - 0.14, kind, fontsize=8, style="italic", va="center")
        for i, line in enumerate(lines):
            ax.text(0.04 if grid else 0.03, y - 0.38 - 0.28 * i, line, fontsize=9,
                    va="center", weight="bold" if kind == "heading" else "normal")
        y -= box_h + 0.15
    fig.savefig(png, dpi=90, bbox_inches="tight")
    print(f"drawn: {png} ({len(layout)} blocks)")


if __name__ == "__main__":
    draw(Path(sys.argv[1]), Path(sys.argv[2]))
