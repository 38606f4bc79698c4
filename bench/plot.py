#!/usr/bin/env python3
"""The bench scripts' SVG plots, drawn with the standard library only; the SVG goes to stdout.

Usage:
  plot.py points FILE XLABEL YLABEL TITLE   "label y x" per line; x on a log scale (labelled points)
  plot.py bars FILE XLABEL TITLE [REF]      "label value [low high]" per line: horizontal bars with
                                            the low..high spread as a whisker; REF draws a dashed
                                            line at that value (1 for ratios)
  plot.py lines FILE XLABEL YLABEL TITLE    "series x y" per line: one line per series (in order of
                                            first appearance), points in file order
Underscores in labels and series names become spaces; a line whose numbers do not parse is left
out, and a file with nothing to draw is an error naming it."""
import math
import sys

COLOURS = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"]


def rows(path, numbers):
    """The lines of `path` as (label, [floats]) with at least `numbers` numbers."""
    out = []
    for line in open(path):
        parts = line.split()
        try:
            values = [float(v) for v in parts[1:]]
        except ValueError:
            continue
        if len(values) >= numbers and all(math.isfinite(v) for v in values):
            out.append((parts[0].replace("_", " "), values))
    if not out:
        sys.exit("plot.py: nothing to draw in " + path)
    return out


def esc(text):
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def frame(w, h, left, top, bottom, right, title):
    return ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">' % (w, h),
            '<rect width="100%" height="100%" fill="white"/>',
            '<text x="%d" y="22" font-size="14">%s</text>' % (left, esc(title)),
            '<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>' % (left, h - bottom, w - right, h - bottom),
            '<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>' % (left, top, left, h - bottom)]


def nice_ticks(lo, hi, count=5):
    """Round tick values (steps of 1, 2, 2.5 or 5 × 10^k) from lo to hi, about `count` of them."""
    raw = (hi - lo) / max(count - 1, 1)
    if raw <= 0:
        return [lo]
    unit = 10 ** math.floor(math.log10(raw))
    step = next(m * unit for m in (1, 2, 2.5, 5, 10) if m * unit >= raw)
    first = math.ceil(lo / step - 1e-9) * step
    return [first + k * step for k in range(int((hi - first) / step + 1e-9) + 1)]


def points(path, xlabel, ylabel, title):
    pts = [(label, v[0], v[1]) for label, v in rows(path, 2)]
    w, h, left, right, top, bottom = 640, 400, 70, 30, 40, 50
    xs = [math.log10(max(p[2], 1e-9)) for p in pts]
    ys = [p[1] for p in pts]
    x0, x1 = math.floor(min(xs)), math.ceil(max(xs))
    x1 = max(x1, x0 + 1)
    pad = max(0.005, (max(ys) - min(ys)) * 0.15)
    y0, y1 = min(ys) - pad, max(ys) + pad
    px = lambda x: left + (x - x0) / (x1 - x0) * (w - left - right)
    py = lambda y: h - bottom - (y - y0) / (y1 - y0) * (h - top - bottom)
    out = frame(w, h, left, top, bottom, right, title)
    for e in range(x0, x1 + 1):
        out.append('<text x="%.1f" y="%d" text-anchor="middle">%g</text>' % (px(e), h - bottom + 16, 10 ** e))
    for y in nice_ticks(y0, y1):
        out.append('<text x="%d" y="%.1f" text-anchor="end">%.3f</text>' % (left - 6, py(y) + 4, y))
    out.append('<text x="%d" y="%d" text-anchor="middle">%s</text>' % ((left + w - right) // 2, h - 12, esc(xlabel)))
    out.append('<text transform="translate(16,%d) rotate(-90)" text-anchor="middle">%s</text>' % ((top + h - bottom) // 2, esc(ylabel)))
    for (label, y, _), x in zip(pts, xs):
        out.append('<circle cx="%.1f" cy="%.1f" r="5" fill="#1f77b4"/>' % (px(x), py(y)))
        out.append('<text x="%.1f" y="%.1f">%s</text>' % (px(x) + 8, py(y) - 6, esc(label)))
    return out


def bars(path, xlabel, title, ref=None):
    data = rows(path, 1)
    bar_h, gap, left, right, top, bottom, w = 18, 8, 260, 60, 40, 50, 760
    h = top + bottom + len(data) * (bar_h + gap)
    hi = max(max(v[-1] if len(v) >= 3 else v[0] for _, v in data), ref or 0) * 1.1
    px = lambda x: left + x / hi * (w - left - right)
    out = frame(w, h, left, top, bottom, right, title)
    for x in nice_ticks(0, hi):
        out.append('<text x="%.1f" y="%d" text-anchor="middle">%g</text>' % (px(x), h - bottom + 16, x))
    out.append('<text x="%d" y="%d" text-anchor="middle">%s</text>' % ((left + w - right) // 2, h - 12, esc(xlabel)))
    for i, (label, v) in enumerate(data):
        y = top + gap / 2 + i * (bar_h + gap)
        out.append('<rect x="%d" y="%.1f" width="%.1f" height="%d" fill="%s"/>' % (left, y, px(v[0]) - left, bar_h, COLOURS[0]))
        out.append('<text x="%d" y="%.1f" text-anchor="end">%s</text>' % (left - 6, y + bar_h - 5, esc(label)))
        end = v[0]
        if len(v) >= 3:
            mid = y + bar_h / 2
            out.append('<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="black"/>' % (px(v[1]), mid, px(v[2]), mid))
            for x in (v[1], v[2]):
                out.append('<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="black"/>' % (px(x), mid - 4, px(x), mid + 4))
            end = v[2]
        out.append('<text x="%.1f" y="%.1f">%.3g</text>' % (px(end) + 6, y + bar_h - 5, v[0]))
    if ref is not None:
        out.append('<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="black" stroke-dasharray="4 3"/>' % (px(ref), top, px(ref), h - bottom))
    return out


def lines(path, xlabel, ylabel, title):
    series = {}
    for name, v in rows(path, 2):
        series.setdefault(name, []).append((v[0], v[1]))
    w, h, left, right, top, bottom = 760, 420, 70, 250, 40, 50
    xs = [x for s in series.values() for x, _ in s]
    ys = [y for s in series.values() for _, y in s]
    x0, x1 = 0.0, max(xs) * 1.05 or 1.0
    pad = max(0.005, (max(ys) - min(ys)) * 0.05)
    y0, y1 = min(ys) - pad, max(ys) + pad
    px = lambda x: left + (x - x0) / (x1 - x0) * (w - left - right)
    py = lambda y: h - bottom - (y - y0) / (y1 - y0) * (h - top - bottom)
    out = frame(w, h, left, top, bottom, right, title)
    for x in nice_ticks(x0, x1):
        out.append('<text x="%.1f" y="%d" text-anchor="middle">%g</text>' % (px(x), h - bottom + 16, x))
    for y in nice_ticks(y0, y1):
        out.append('<text x="%d" y="%.1f" text-anchor="end">%.3f</text>' % (left - 6, py(y) + 4, y))
    out.append('<text x="%d" y="%d" text-anchor="middle">%s</text>' % ((left + w - right) // 2, h - 12, esc(xlabel)))
    out.append('<text transform="translate(16,%d) rotate(-90)" text-anchor="middle">%s</text>' % ((top + h - bottom) // 2, esc(ylabel)))
    for i, (name, pts) in enumerate(series.items()):
        colour = COLOURS[i % len(COLOURS)]
        out.append('<polyline fill="none" stroke="%s" stroke-width="1.5" points="%s"/>' %
                   (colour, " ".join("%.1f,%.1f" % (px(x), py(y)) for x, y in pts)))
        ly = top + 14 + i * 18
        out.append('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="2"/>' % (w - right + 10, ly - 4, w - right + 30, ly - 4, colour))
        out.append('<text x="%d" y="%d">%s</text>' % (w - right + 36, ly, esc(name)))
    return out


def main():
    usage = __doc__.split("\n\n")[1]
    if sys.argv[1:2] in (["-h"], ["--help"]):
        print(__doc__)
        return
    try:
        kind, args = sys.argv[1], sys.argv[2:]
        if kind == "points" and len(args) == 4:
            out = points(*args)
        elif kind == "bars" and len(args) in (3, 4):
            out = bars(args[0], args[1], args[2], float(args[3]) if len(args) == 4 else None)
        elif kind == "lines" and len(args) == 4:
            out = lines(*args)
        else:
            raise IndexError
    except IndexError:
        sys.stderr.write(usage + "\n")
        sys.exit(2)
    out.append("</svg>")
    print("\n".join(out))


if __name__ == "__main__":
    main()
