#!/usr/bin/env python3
"""Draws labelled points (x on a log scale) as an SVG on stdout, with the standard library only.

Usage: plot_points.py POINTS XLABEL YLABEL TITLE
POINTS holds one point per line: "label y x" (underscores in the label become spaces); a line
whose y or x is not a number is left out."""
import math
import sys


def main():
    path, xlabel, ylabel, title = sys.argv[1:5]
    points = []
    for line in open(path):
        parts = line.split()
        try:
            points.append((parts[0].replace("_", " "), float(parts[1]), float(parts[2])))
        except (IndexError, ValueError):
            continue
    if not points:
        sys.exit("plot_points.py: no points in " + path)
    w, h, left, right, top, bottom = 640, 400, 70, 30, 40, 50
    xs = [math.log10(max(p[2], 1e-9)) for p in points]
    ys = [p[1] for p in points]
    x0, x1 = math.floor(min(xs)), math.ceil(max(xs))
    x1 = max(x1, x0 + 1)
    y0, y1 = min(ys), max(ys)
    pad = max(0.005, (y1 - y0) * 0.15)
    y0, y1 = y0 - pad, y1 + pad

    def px(x):
        return left + (x - x0) / (x1 - x0) * (w - left - right)

    def py(y):
        return h - bottom - (y - y0) / (y1 - y0) * (h - top - bottom)

    out = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">' % (w, h),
           '<rect width="100%" height="100%" fill="white"/>',
           '<text x="%d" y="22" font-size="14">%s</text>' % (left, title),
           '<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>' % (left, h - bottom, w - right, h - bottom),
           '<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>' % (left, top, left, h - bottom)]
    for e in range(x0, x1 + 1):
        out.append('<text x="%.1f" y="%d" text-anchor="middle">%g</text>' % (px(e), h - bottom + 16, 10 ** e))
    for k in range(5):
        y = y0 + (y1 - y0) * k / 4
        out.append('<text x="%d" y="%.1f" text-anchor="end">%.3f</text>' % (left - 6, py(y) + 4, y))
    out.append('<text x="%d" y="%d" text-anchor="middle">%s</text>' % ((left + w - right) // 2, h - 12, xlabel))
    out.append('<text transform="translate(16,%d) rotate(-90)" text-anchor="middle">%s</text>' % ((top + h - bottom) // 2, ylabel))
    for (label, y, _), x in zip(points, xs):
        out.append('<circle cx="%.1f" cy="%.1f" r="5" fill="#1f77b4"/>' % (px(x), py(y)))
        out.append('<text x="%.1f" y="%.1f">%s</text>' % (px(x) + 8, py(y) - 6, label))
    out.append("</svg>")
    print("\n".join(out))


if __name__ == "__main__":
    main()
